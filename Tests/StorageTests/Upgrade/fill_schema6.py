#!/usr/bin/env python3
"""Fills a database with the billingd of schema step 6 (the release before the subscription model, commit
453950a) through its public API, then dumps it: the fixtures the upgrade tests (SchemaUpgradeTests) migrate
with the current build. Run from a checkout of that commit, built (`swift build`), with this file's directory
as OUT:

    python3 fill_schema6.py OLD_CHECKOUT OUT_DIR [POSTGRES_URL]

What it records (times relative to a fixed clock, all in the past): account `legacy-a` buys a non-consumable
(SubmitReceipt), three consumables in one order (quantity 3) later refunded by a REFUND notification, and a
monthly subscription renewed twice by DID_RENEW notifications; account `legacy-b` a subscription that an
EXPIRED notification ended; one order stays PENDING. Writes schema6.sqlite.sql (`sqlite3 .dump`) and, with a
PostgreSQL URL, schema6.postgres.sql (`pg_dump --inserts --no-owner`)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

OLD, OUT = sys.argv[1], sys.argv[2]
PG = sys.argv[3] if len(sys.argv) > 3 else None
sys.path.insert(0, os.path.join(OLD, "IntegrationTests"))
import conftest  # noqa: E402  (generates the old stubs)
import appstore_mint as mint  # noqa: E402
from conftest import Billingd  # noqa: E402
from helpers import billing, pb  # noqa: E402

DAY = 86_400_000
NOW = int(time.time() * 1000)


def fill(node, signer):
    stub = billing(node.channel())
    notify_port = node.notify_port

    def post(jws):
        req = urllib.request.Request(f"http://127.0.0.1:{notify_port}/appstore/notifications", data=mint.body(jws),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200, r.status

    def buy(account, product, tid, kind, *, quantity=1, purchase, expires=None, original=None):
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product, quantity=quantity)).order
        tx = mint.transaction(tid, product, original=original, product_type=kind, purchase_ms=purchase, expires_ms=expires,
                              token=order.order_id, signed_ms=purchase, quantity=quantity)
        stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=signer.sign(tx)))
        return order, tx

    buy("legacy-a", "com.example.premium", "600001", mint.NON_CONSUMABLE, purchase=NOW - 50 * DAY)
    _, coins = buy("legacy-a", "com.example.coins", "600002", "Consumable", quantity=3, purchase=NOW - 40 * DAY)
    refunded = dict(coins, revocationDate=NOW - 39 * DAY, revocationReason=1, signedDate=NOW - 39 * DAY)
    post(mint.notification(signer, "REFUND", signed_ms=NOW - 39 * DAY, tx=refunded))
    start = NOW - 70 * DAY
    buy("legacy-a", "com.example.pro.monthly", "600010", mint.SUBSCRIPTION, purchase=start, expires=start + 30 * DAY)
    for r in (1, 2):
        t = start + r * 30 * DAY
        tx = mint.transaction(str(600010 + r), "com.example.pro.monthly", original="600010", purchase_ms=t,
                              expires_ms=t + 30 * DAY, signed_ms=t)
        post(mint.notification(signer, "DID_RENEW", signed_ms=t, tx=tx))
    b0 = NOW - 60 * DAY
    _, bsub = buy("legacy-b", "com.example.pro.monthly", "600020", mint.SUBSCRIPTION, purchase=b0, expires=b0 + 30 * DAY)
    post(mint.notification(signer, "EXPIRED", subtype="VOLUNTARY", signed_ms=b0 + 30 * DAY, tx=dict(bsub, signedDate=b0 + 30 * DAY)))
    stub.CreateOrder(pb.CreateOrderRequest(account_id="legacy-b", product_id="com.example.premium"))


def run(database, store):
    os.environ["BILLINGD"] = os.path.join(OLD, ".build", "debug", "billingd")
    port = conftest.free_port()
    node = Billingd("--dev", "--dev-store", store, "--notifications-listen", f"127.0.0.1:{port}", database=database)
    node.notify_port = port
    try:
        fill(node, mint.Signer(store))
    finally:
        node.stop()


def main():
    store = tempfile.mkdtemp(prefix="fill-store-")
    work = tempfile.mkdtemp(prefix="fill-sqlite-")
    path = os.path.join(work, "billing.db")
    run(f"sqlite:{path}", store)
    dump = subprocess.run(["sqlite3", path, ".dump"], check=True, capture_output=True, text=True).stdout
    # .dump leaves out the schema version billingd keeps in user_version.
    version = subprocess.run(["sqlite3", path, "PRAGMA user_version;"], check=True, capture_output=True, text=True).stdout.strip()
    dump += f"PRAGMA user_version = {version};\n"
    with open(os.path.join(OUT, "schema6.sqlite.sql"), "w") as f:
        f.write(dump)
    if PG:
        name = "fill_schema6_" + str(os.getpid())
        subprocess.run(["psql", PG, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
        url = PG.rsplit("/", 1)[0] + "/" + name
        run(url, store)
        dump = subprocess.run(["pg_dump", "--inserts", "--no-owner", "--no-privileges", url], check=True,
                              capture_output=True, text=True).stdout
        with open(os.path.join(OUT, "schema6.postgres.sql"), "w") as f:
            f.write(dump)
        subprocess.run(["psql", PG, "-q", "-c", f"DROP DATABASE {name}"], check=True)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
