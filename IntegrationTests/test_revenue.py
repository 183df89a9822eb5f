"""billing.v1.Revenue against a reference computed here, on SQLite and PostgreSQL.

A generated history (2,000 subscriptions and 5,000 one-time purchases over App Store and Google Play, five currencies
with an ECB-format rates file that, like the ECB's, has no weekend rows, and a currency it has no rate for; trials
converted and not, renewals, an upgrade inside a chain, grace periods, prorated and full refunds, Family Sharing
copies, app-receipt rows without a price, sandbox money, grants) is written straight into the database billingd
migrated (the ingestion paths have their own suites), then read back only through ListTransactions. The reference
below computes every metric from those transactions by DESIGN.md "Revenue, defined", written apart from billingd's
code, and must agree with GetRevenueSeries to the milliunit for every metric, granularity and dimension; the
summary and the export (CSV and JSON lines: its rows and sums equal the series) too."""
import csv
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction

import grpc
import pytest

from conftest import Billingd, postgres_database
from helpers import billing, expect_error, pb, pb_grpc

DAY = 86_400_000
UTC = timezone.utc
BUNDLE = "com.example.app"


def ms(d):
    return int(d.replace(tzinfo=UTC).timestamp() * 1000)


START = ms(datetime(2025, 6, 1))
END = ms(datetime(2026, 11, 1))
NOW = int(time.time() * 1000)
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CHF"]   # CHF has no rate: unconverted
STOREFRONTS = ["USA", "DEU", "JPN", "GBR", ""]
SUB_PRODUCTS = {"pro.weekly": 7, "pro.monthly": 30, "pro.yearly": 365}
COMMISSION = {1: (Fraction(30), Fraction(15)), 2: (Fraction(15), Fraction(15))}
STORE_NAMES = {1: "APP_STORE", 2: "GOOGLE_PLAY"}
TX_COLUMNS = ("transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, "
              "expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id, signed_time_ms, "
              "revocation_reason, store, ownership, upgraded, revocation_type, revocation_percentage, price_milliunits, currency, "
              "storefront, offer_id, offer_type, subscription_group_id, purchase_token")


# ---------------------------------------------------------------------------------------------------------------
# The rates file (ECB format: newest first, weekdays only, N/A on some days, a trailing comma).

def make_rates(rng):
    first = date(2025, 5, 20)
    rows = []
    rate = {"USD": 1.08, "JPY": 160.0, "GBP": 0.85}
    d = first
    while d <= date(2026, 11, 5):
        if d.weekday() < 5:
            for k in rate:
                rate[k] *= 1 + rng.uniform(-0.004, 0.004)
            cells = [f"{rate['USD']:.4f}", f"{rate['JPY']:.2f}", "N/A" if rng.random() < 0.03 else f"{rate['GBP']:.5f}"]
            rows.append((d, cells))
        d += timedelta(days=1)
    lines = ["Date,USD,JPY,GBP,"] + [f"{d.isoformat()},{','.join(c)}," for d, c in reversed(rows)]
    return "\n".join(lines) + "\n"


def parse_rates(text):
    """{currency: [(day number, Fraction)]} ascending."""
    lines = text.strip().split("\n")
    names = lines[0].split(",")[1:]
    table = {}
    for line in lines[1:]:
        cells = line.split(",")
        day = (date.fromisoformat(cells[0]) - date(1970, 1, 1)).days
        for name, cell in zip(names, cells[1:]):
            if name and cell and cell != "N/A":
                table.setdefault(name, []).append((day, Fraction(cell)))
    for v in table.values():
        v.sort()
    return table


def rate_on(table, currency, day):
    if currency == "EUR":
        return Fraction(1)
    best = None
    for d, r in table.get(currency, []):
        if d <= day:
            best = r
        else:
            break
    return best


def round_half_away(x):
    n = abs(x.numerator) * 2 + x.denominator
    q = n // (2 * x.denominator)
    return q if x >= 0 else -q


def day_of(t):
    return t // DAY


# ---------------------------------------------------------------------------------------------------------------
# The generated history.

class History:
    def __init__(self, seed=20261204):
        rng = random.Random(seed)
        self.rng = rng
        self.rows = []          # transaction tuples in TX_COLUMNS order
        self.renewals = {}      # original -> grace end
        self.accounts = set()
        self.next_id = 1

        def tid():
            self.next_id += 1
            return f"7{self.next_id:09d}"

        def add(**t):
            row = dict(order_id=None, expires_time_ms=0, revocation_time_ms=0, quantity=1, environment=1, app_account_token=None,
                       bundle_id=BUNDLE, revocation_reason=None, ownership=1, upgraded=0, revocation_type=0,
                       revocation_percentage=0, price_milliunits=0, currency="", storefront="", offer_id="", offer_type="",
                       subscription_group_id="", purchase_token="")
            row.update(t)
            row["signed_time_ms"] = row["purchase_time_ms"]
            if row["account_id"]:
                self.accounts.add(row["account_id"])
            self.rows.append(row)
            return row

        edges = [ms(datetime(2026, 3, 31, 23, 59, 59)) + 999,   # the last millisecond of a day and a month
                 ms(datetime(2026, 4, 6)),                      # a Monday (an ISO week's first instant)
                 ms(datetime(2026, 5, 1))]                      # the first of a month
        for i in range(2000):
            account = f"acct-{i % 1400:05d}"
            store = 1 if rng.random() < 0.6 else 2
            env = 2 if rng.random() < 0.05 else 1
            product = rng.choice(list(SUB_PRODUCTS))
            days = SUB_PRODUCTS[product]
            currency = rng.choice(CURRENCIES)
            storefront = rng.choice(STOREFRONTS)
            price = {"pro.weekly": 1990, "pro.monthly": 4990, "pro.yearly": 39990}[product]
            if currency == "JPY":
                price *= 150
            t = edges[i] if i < len(edges) else rng.randint(START - 30 * DAY, END - 20 * DAY)
            original = tid()
            first = True
            if rng.random() < 0.3:   # a free trial first
                add(transaction_id=original, original_transaction_id=original, account_id=account, product_id=product,
                    product_kind="auto_renewable_subscription", purchase_time_ms=t, expires_time_ms=t + 7 * DAY, environment=env,
                    store=store, price_milliunits=0, currency=currency, storefront=storefront, offer_type="INTRODUCTORY_OFFER",
                    offer_id="trial7", subscription_group_id="g1")
                first = False
                t += 7 * DAY
                if rng.random() < 0.4:
                    continue        # not converted
            periods = rng.choice([1, 1, 2, 3, 5, 8, 13, 20])
            last = None
            for k in range(periods):
                x = original if first else tid()
                first = False
                if product == "pro.monthly" and k == 3 and rng.random() < 0.15:
                    # An upgrade inside the chain: the old period superseded, a yearly one from now on.
                    if last is not None:
                        last["upgraded"] = 1
                    product, days, price = "pro.yearly", 365, 39990 * (150 if currency == "JPY" else 1)
                last = add(transaction_id=x, original_transaction_id=original, account_id=account, product_id=product,
                           product_kind="auto_renewable_subscription", purchase_time_ms=t, expires_time_ms=t + days * DAY,
                           environment=env, store=store, price_milliunits=price, currency=currency, storefront=storefront,
                           subscription_group_id="g1")
                t += days * DAY
                if t > NOW:
                    break
            if last is None:
                continue
            r = rng.random()
            if r < 0.05:
                last["revocation_time_ms"] = last["purchase_time_ms"] + rng.randint(1, 5) * DAY
                last["revocation_type"] = 1
            elif r < 0.10:
                last["revocation_time_ms"] = last["purchase_time_ms"] + rng.randint(1, 5) * DAY
                last["revocation_type"] = 2
                last["revocation_percentage"] = rng.choice([25000, 33333, 50000, 66667])
            elif r < 0.16:
                # Billing grace after the last period: access continues 16 days.
                self.renewals[original] = last["expires_time_ms"] + 16 * DAY
            if rng.random() < 0.05:
                # A Family Sharing copy in another account: no money, no count.
                add(transaction_id=tid(), original_transaction_id=original, account_id=f"family-{i:05d}", product_id=product,
                    product_kind="auto_renewable_subscription", purchase_time_ms=last["purchase_time_ms"],
                    expires_time_ms=last["expires_time_ms"], environment=env, store=1, ownership=2,
                    price_milliunits=price, currency=currency, storefront=storefront, subscription_group_id="g1")
        for i in range(5000):
            account = f"acct-{rng.randrange(3000):05d}"
            store = 1 if rng.random() < 0.6 else 2
            env = 2 if rng.random() < 0.05 else 1
            kind = rng.choice(["consumable", "consumable", "non_consumable"])
            product = "coins.100" if kind == "consumable" else "unlock.all"
            currency = rng.choice(CURRENCIES)
            t = rng.randint(START - 10 * DAY, END + 5 * DAY)
            receipt = rng.random() < 0.05       # an app receipt: no price at all
            price = 0 if receipt else rng.choice([990, 1990, 4990]) * (150 if currency == "JPY" else 1)
            row = add(transaction_id=tid(), original_transaction_id=None, account_id=account, product_id=product, product_kind=kind,
                      purchase_time_ms=t, environment=env, store=store, quantity=rng.choice([1, 1, 1, 2, 3]) if kind == "consumable" else 1,
                      price_milliunits=price, currency="" if receipt else currency, storefront=rng.choice(STOREFRONTS))
            row["original_transaction_id"] = row["transaction_id"]
            r = rng.random()
            if r < 0.04:
                row["revocation_time_ms"] = t + rng.randint(0, 40) * DAY
                row["revocation_type"] = 1
            elif r < 0.07:
                row["revocation_time_ms"] = t + rng.randint(0, 40) * DAY
                row["revocation_type"] = 2
                row["revocation_percentage"] = rng.choice([10000, 50000, 99999])
            elif r < 0.08:
                row["revocation_time_ms"] = t + DAY     # app receipt style: revoked, no type (a full refund)
        # Unowned: recorded from a notification before anyone proved it; no account, no money.
        add(transaction_id=tid(), original_transaction_id="unowned-1", account_id="", product_id="coins.100", product_kind="consumable",
            purchase_time_ms=START + 5 * DAY, store=1, price_milliunits=990, currency="USD")
        self.rates_text = make_rates(rng)

    def tuples(self):
        names = [c.strip() for c in TX_COLUMNS.split(",")]
        return [tuple(r[n] for n in names) for r in self.rows]


GRANTS = [  # (id, account, start, expires, revoked)
    ("grant_a", "acct-00001", START, 0, 0),
    ("grant_b", "acct-00002", START, END + 400 * DAY, 0),
    ("grant_c", "acct-00003", START, START + DAY, 0),
    ("grant_d", "acct-00004", START, 0, START + 2 * DAY),
]


def fill_sqlite(path, history):
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN")
    con.executemany(f"INSERT INTO transactions ({TX_COLUMNS}) VALUES ({', '.join('?' * 27)})", history.tuples())
    con.executemany("INSERT INTO renewals (original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, "
                    "ended_signed_time_ms) VALUES (?, 1, ?, 1, 0)", list(history.renewals.items()))
    con.executemany("INSERT INTO grants (grant_id, account_id, product_id, start_time_ms, expires_time_ms, revocation_time_ms, reason, "
                    "operator) VALUES (?, ?, 'unlock.all', ?, ?, ?, 'test', 'support')", GRANTS)
    con.execute("COMMIT")
    con.close()


def fill_postgres(url, history):
    def copy(table, columns, rows):
        buf = io.StringIO()
        w = csv.writer(buf)
        for r in rows:
            w.writerow(["\\N" if v is None else v for v in r])
        subprocess.run(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                        f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT csv, NULL '\\N')"],
                       input=buf.getvalue(), text=True, check=True, capture_output=True)
    copy("transactions", TX_COLUMNS, history.tuples())
    copy("renewals", "original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, ended_signed_time_ms",
         [(k, 1, v, 1, 0) for k, v in history.renewals.items()])
    copy("grants", "grant_id, account_id, product_id, start_time_ms, expires_time_ms, revocation_time_ms, reason, operator",
         [(g[0], g[1], "unlock.all", g[2], g[3], g[4], "test", "support") for g in GRANTS])


# ---------------------------------------------------------------------------------------------------------------
# The reference: DESIGN.md "Revenue, defined", from ListTransactions' answers.

class Reference:
    def __init__(self, txs, grace, rates_text, currency="USD"):
        self.rates = parse_rates(rates_text)
        self.currency = currency
        self.grace = grace
        # Counted: the buyer's own store transactions.
        self.txs = [t for t in txs if t.ownership == pb.OWNERSHIP_PURCHASED and t.store in (1, 2)]
        self.first_paid = {}
        for t in self.txs:
            if t.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION and t.price_milliunits > 0:
                o = t.original_transaction_id
                self.first_paid[o] = min(self.first_paid.get(o, t.purchase_time_ms), t.purchase_time_ms)
        self.chains = {}
        for t in self.txs:
            if t.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION:
                self.chains.setdefault(t.original_transaction_id, []).append(t)
        for c in self.chains.values():
            c.sort(key=lambda t: (t.purchase_time_ms, t.transaction_id))

    def convert(self, amount, factor, currency, day, left):
        if currency == self.currency:
            return round_half_away(amount * factor)
        src, dst = rate_on(self.rates, currency, day), rate_on(self.rates, self.currency, day)
        if src is None or dst is None:
            left[currency] = left.get(currency, 0) + round_half_away(amount * factor)
            return None
        return round_half_away(amount * factor * dst / src)

    def kept(self, t):
        later = (t.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION and t.original_transaction_id in self.first_paid
                 and t.purchase_time_ms - self.first_paid[t.original_transaction_id] >= 365 * DAY)
        first, lat = COMMISSION[t.store]
        return 1 - (lat if later else first) / 100

    @staticmethod
    def share(t):
        if t.revocation_time_ms == 0 or t.revocation_type == pb.REVOCATION_TYPE_FAMILY_REVOKE:
            return None
        if t.revocation_type == pb.REVOCATION_TYPE_REFUND_PRORATED:
            return Fraction(t.revocation_percentage, 100000)
        return Fraction(1)

    @staticmethod
    def group(t, dim):
        return {0: "", 1: t.product_id, 2: STORE_NAMES[t.store], 3: t.storefront, 4: t.currency}[dim]

    def series(self, metric, bounds, dim, store=None, product=None, now=NOW):
        n = len(bounds) - 1
        out, left = {}, {}
        if dim == 0:
            out[""] = [0] * n

        def index(x):
            if x < bounds[0] or x >= bounds[-1]:
                return None
            i = 0
            while bounds[i + 1] <= x:
                i += 1
            return i

        def put(t, k, v):
            g = self.group(t, dim)
            out.setdefault(g, [0] * n)
            if k is not None and v is not None:
                out[g][k] += v

        def ok(t):
            return (store is None or t.store == store) and (product is None or t.product_id == product)

        M = pb
        if metric in (M.REVENUE_METRIC_GROSS, M.REVENUE_METRIC_REFUNDS, M.REVENUE_METRIC_NET, M.REVENUE_METRIC_PROCEEDS,
                      M.REVENUE_METRIC_REFUNDED_TRANSACTIONS):
            for t in self.txs:
                if not ok(t) or not (t.price_milliunits > 0 or t.offer_type):
                    continue
                paid = t.price_milliunits * t.quantity
                kept = self.kept(t) if metric == M.REVENUE_METRIC_PROCEEDS else Fraction(1)
                if metric in (M.REVENUE_METRIC_GROSS, M.REVENUE_METRIC_NET, M.REVENUE_METRIC_PROCEEDS) and paid > 0:
                    k = index(t.purchase_time_ms)
                    if k is not None:
                        put(t, k, self.convert(paid, kept, t.currency, day_of(t.purchase_time_ms), left))
                if metric == M.REVENUE_METRIC_GROSS or t.revocation_time_ms == 0 or t.revocation_type == M.REVOCATION_TYPE_FAMILY_REVOKE:
                    continue
                k = index(t.revocation_time_ms)
                if k is None:
                    continue
                if metric == M.REVENUE_METRIC_REFUNDED_TRANSACTIONS:
                    put(t, k, 1)
                    continue
                if paid == 0:
                    continue
                sub = {}
                v = self.convert(paid, self.share(t) * kept, t.currency, day_of(t.revocation_time_ms), sub)
                for c, x in sub.items():
                    left[c] = left.get(c, 0) + (x if metric == M.REVENUE_METRIC_REFUNDS else -x)
                put(t, k, None if v is None else (v if metric == M.REVENUE_METRIC_REFUNDS else -v))
        elif metric in (M.REVENUE_METRIC_MRR, M.REVENUE_METRIC_ACTIVE_SUBSCRIPTIONS, M.REVENUE_METRIC_ACTIVE_TRIALS):
            instants = [min(bounds[k + 1] - 1, now) for k in range(n)]
            for o, chain in self.chains.items():
                for k, at in enumerate(instants):
                    cur = None
                    for j, t in enumerate(chain):
                        if t.purchase_time_ms <= at:
                            cur = j
                    if cur is None:
                        continue
                    t = chain[cur]
                    end = t.expires_time_ms
                    if cur == len(chain) - 1:
                        end = max(end, self.grace.get(o, 0))
                    if t.revocation_time_ms:
                        end = min(end, t.revocation_time_ms)
                    if not at < end or not ok(t):
                        continue
                    trial = t.price_milliunits == 0 and t.offer_type != ""
                    if metric == M.REVENUE_METRIC_ACTIVE_TRIALS:
                        if trial:
                            put(t, k, 1)
                    elif t.price_milliunits > 0:
                        if metric == M.REVENUE_METRIC_ACTIVE_SUBSCRIPTIONS:
                            put(t, k, 1)
                        else:
                            d = round_half_away(Fraction(t.expires_time_ms - t.purchase_time_ms, DAY))
                            f = (Fraction(52, 12) if d <= 8 else Fraction(1) if d <= 35 else Fraction(1, 2) if d <= 65
                                 else Fraction(1, 3) if d <= 100 else Fraction(1, 6) if d <= 200 else Fraction(1, 12))
                            put(t, k, self.convert(t.price_milliunits * t.quantity, f, t.currency, day_of(t.purchase_time_ms), left))
        else:
            for o, chain in self.chains.items():
                paid = [j for j, t in enumerate(chain) if t.price_milliunits > 0]
                if metric in (M.REVENUE_METRIC_NEW_SUBSCRIPTIONS, M.REVENUE_METRIC_TRIAL_CONVERSIONS):
                    if not paid:
                        continue
                    f = paid[0]
                    if metric == M.REVENUE_METRIC_TRIAL_CONVERSIONS and not any(
                            t.price_milliunits == 0 and t.offer_type for t in chain[:f]):
                        continue
                    t = chain[f]
                    if ok(t) and index(t.purchase_time_ms) is not None:
                        put(t, index(t.purchase_time_ms), 1)
                elif metric == M.REVENUE_METRIC_TRIAL_STARTS:
                    t = chain[0]
                    if t.price_milliunits == 0 and t.offer_type and ok(t) and index(t.purchase_time_ms) is not None:
                        put(t, index(t.purchase_time_ms), 1)
                else:  # churned
                    if not paid:
                        continue
                    last = paid[-1]
                    t = chain[last]
                    end = t.expires_time_ms
                    if last == len(chain) - 1:
                        end = max(end, self.grace.get(o, 0))
                    if t.revocation_time_ms:
                        end = min(end, t.revocation_time_ms)
                    if end > now or any(x.purchase_time_ms >= end for x in chain):
                        continue
                    if ok(t) and index(end) is not None:
                        put(t, index(end), 1)
        return out, {c: v for c, v in left.items() if v != 0}


def bounds_of(start, end, granularity):
    def align(x):
        d = datetime.fromtimestamp(x / 1000, UTC)
        d0 = datetime(d.year, d.month, d.day, tzinfo=UTC)
        if granularity == pb.GRANULARITY_WEEK:
            d0 -= timedelta(days=d0.weekday())
        elif granularity == pb.GRANULARITY_MONTH:
            d0 = d0.replace(day=1)
        return int(d0.timestamp() * 1000)

    def nxt(x):
        d = datetime.fromtimestamp(x / 1000, UTC)
        if granularity == pb.GRANULARITY_MONTH:
            return int(datetime(d.year + (d.month == 12), d.month % 12 + 1, 1, tzinfo=UTC).timestamp() * 1000)
        return x + (7 if granularity == pb.GRANULARITY_WEEK else 1) * DAY

    b = [align(start)]
    while b[-1] < end:
        b.append(nxt(b[-1]))
    return b


# ---------------------------------------------------------------------------------------------------------------

class Books:
    def __init__(self, database):
        self.history = History()
        self.dir = tempfile.mkdtemp(prefix="revenue-")
        self.rates_path = os.path.join(self.dir, "rates.csv")
        with open(self.rates_path, "w") as f:
            f.write(self.history.rates_text)
        flags = ["--dev", "--exchange-rates", self.rates_path, "--reporting-currency", "USD"]
        self.server = Billingd(*flags, db_dir=self.dir, database=database)
        self.server.stop()
        if database:
            fill_postgres(database, self.history)
        else:
            fill_sqlite(os.path.join(self.dir, "billing.db"), self.history)
        self.server.start()
        self.channel = self.server.channel()
        self.revenue = pb_grpc.RevenueStub(self.channel)
        self.billing = billing(self.channel)
        # Read back through ListTransactions only.
        txs = []
        for account in sorted(self.history.accounts):
            token = ""
            while True:
                r = self.billing.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=100, page_token=token), timeout=10)
                txs += r.transactions
                token = r.next_page_token
                if not token:
                    break
        self.txs = txs
        self.ref = Reference([t for t in txs if t.environment == pb.ENVIRONMENT_PRODUCTION], self.history.renewals, self.history.rates_text)

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def books(request):
    b = Books(postgres_database() if request.param == "postgres" else None)
    yield b
    b.close()


def ask(books, metric, granularity, dim=0, **kw):
    r = books.revenue.GetRevenueSeries(pb.GetRevenueSeriesRequest(
        metric=metric, start_time_ms=START, end_time_ms=END, granularity=granularity, group_by=dim, **kw), timeout=60)
    return r


METRICS = [v.number for v in pb.RevenueMetric.DESCRIPTOR.values if v.number != 0]
DIMENSIONS = [v.number for v in pb.RevenueDimension.DESCRIPTOR.values]


def test_the_history_is_what_the_issue_asks(books):
    chains = books.ref.chains
    assert len([o for o in chains]) >= 1800          # 2,000 generated (sandbox ones are apart)
    one_time = [t for t in books.txs if t.product_type in (pb.PRODUCT_TYPE_CONSUMABLE, pb.PRODUCT_TYPE_NON_CONSUMABLE)]
    assert len(one_time) >= 5000
    assert {t.store for t in books.txs} >= {pb.STORE_APP_STORE, pb.STORE_GOOGLE_PLAY}
    assert {t.currency for t in books.txs} >= set(CURRENCIES)
    assert any(t.ownership == pb.OWNERSHIP_FAMILY_SHARED for t in books.txs)
    assert any(t.environment == pb.ENVIRONMENT_SANDBOX for t in books.txs)
    assert any(t.revocation_type == pb.REVOCATION_TYPE_REFUND_PRORATED for t in books.txs)
    assert any(t.upgraded for t in books.txs)


@pytest.mark.parametrize("granularity", [pb.GRANULARITY_DAY, pb.GRANULARITY_WEEK, pb.GRANULARITY_MONTH])
def test_every_metric_and_dimension_agrees_with_the_reference(books, granularity):
    bounds = bounds_of(START, END, granularity)
    for metric in METRICS:
        for dim in DIMENSIONS:
            got = ask(books, metric, granularity, dim)
            want, left = books.ref.series(metric, bounds, dim)
            assert got.currency == "USD"
            series = {s.group: [p.value for p in s.points] for s in got.series}
            for s in got.series:
                assert [p.start_time_ms for p in s.points] == bounds[:-1]
            name = pb.RevenueMetric.Name(metric), pb.RevenueDimension.Name(dim)
            assert series == want, name
            assert {m.currency: m.milliunits for m in got.unconverted} == left, name


def test_filters_by_store_and_product(books):
    bounds = bounds_of(START, END, pb.GRANULARITY_MONTH)
    for metric in (pb.REVENUE_METRIC_GROSS, pb.REVENUE_METRIC_MRR, pb.REVENUE_METRIC_NEW_SUBSCRIPTIONS, pb.REVENUE_METRIC_PROCEEDS):
        for store in (pb.STORE_APP_STORE, pb.STORE_GOOGLE_PLAY):
            got = ask(books, metric, pb.GRANULARITY_MONTH, store=store)
            want, _ = books.ref.series(metric, bounds, 0, store=store)
            assert [p.value for p in got.series[0].points] == want[""]
        got = ask(books, metric, pb.GRANULARITY_MONTH, product_id="pro.yearly")
        want, _ = books.ref.series(metric, bounds, 0, product="pro.yearly")
        assert [p.value for p in got.series[0].points] == want[""]


def test_other_currencies_and_environments(books):
    bounds = bounds_of(START, END, pb.GRANULARITY_MONTH)
    got = ask(books, pb.REVENUE_METRIC_NET, pb.GRANULARITY_MONTH, currency="EUR")
    ref = Reference([t for t in books.txs if t.environment == pb.ENVIRONMENT_PRODUCTION], books.history.renewals,
                    books.history.rates_text, currency="EUR")
    want, left = ref.series(pb.REVENUE_METRIC_NET, bounds, 0)
    assert got.currency == "EUR" and [p.value for p in got.series[0].points] == want[""]
    assert {m.currency: m.milliunits for m in got.unconverted} == left
    # Sandbox money only with ENVIRONMENT_SANDBOX.
    sandbox = Reference([t for t in books.txs if t.environment == pb.ENVIRONMENT_SANDBOX], books.history.renewals, books.history.rates_text)
    got = ask(books, pb.REVENUE_METRIC_GROSS, pb.GRANULARITY_MONTH, environment=pb.ENVIRONMENT_SANDBOX)
    want, _ = sandbox.series(pb.REVENUE_METRIC_GROSS, bounds, 0)
    assert [p.value for p in got.series[0].points] == want[""] and sum(want[""]) > 0


def test_period_edges(books):
    # The purchase at 23:59:59.999 UTC on 2026-03-31 is that day's, that ISO week's and March's.
    edge = ms(datetime(2026, 3, 31, 23, 59, 59)) + 999
    for g in (pb.GRANULARITY_DAY, pb.GRANULARITY_WEEK, pb.GRANULARITY_MONTH):
        got = books.revenue.GetRevenueSeries(pb.GetRevenueSeriesRequest(
            metric=pb.REVENUE_METRIC_NEW_SUBSCRIPTIONS, start_time_ms=edge, end_time_ms=edge + 1, granularity=g), timeout=30)
        start = got.series[0].points[0].start_time_ms
        assert start == {pb.GRANULARITY_DAY: ms(datetime(2026, 3, 31)), pb.GRANULARITY_WEEK: ms(datetime(2026, 3, 30)),
                         pb.GRANULARITY_MONTH: ms(datetime(2026, 3, 1))}[g]
        want, _ = books.ref.series(pb.REVENUE_METRIC_NEW_SUBSCRIPTIONS, bounds_of(edge, edge + 1, g), 0)
        assert [p.value for p in got.series[0].points] == want[""]


def test_weekend_rate_is_the_fridays_and_a_currency_without_rates_is_unconverted(books):
    table = parse_rates(books.history.rates_text)
    saturday = (date(2026, 4, 4) - date(1970, 1, 1)).days
    friday = saturday - 1
    assert all(d != saturday for d, _ in table["USD"]) and any(d == friday for d, _ in table["USD"])
    assert rate_on(table, "JPY", saturday) == dict(table["JPY"])[friday]
    got = ask(books, pb.REVENUE_METRIC_GROSS, pb.GRANULARITY_MONTH, dim=pb.REVENUE_DIMENSION_CURRENCY)
    assert "CHF" in {m.currency for m in got.unconverted}
    chf = [s for s in got.series if s.group == "CHF"]
    assert chf and all(p.value == 0 for p in chf[0].points)


def test_summary_agrees(books):
    def thirty_days(at):
        gross, _ = books.ref.series(pb.REVENUE_METRIC_GROSS, [at - 30 * DAY, at], 0)
        net, _ = books.ref.series(pb.REVENUE_METRIC_NET, [at - 30 * DAY, at], 0)
        return gross[""][0], net[""][0]

    def grants_at(at):
        return sum(1 for g in GRANTS if g[2] <= at and (g[3] == 0 or at < g[3]) and (g[4] == 0 or at < g[4]))

    for as_of in (ms(datetime(2026, 6, 15, 12)), 0):
        # As of now: the server's now lies between these two instants (a window edge may pass a purchase between the
        # module's import and this call: the reference is computed at both ends of the call, not at import time).
        before = int(time.time() * 1000)
        r = books.revenue.GetRevenueSummary(pb.GetRevenueSummaryRequest(as_of_time_ms=as_of), timeout=30)
        after = int(time.time() * 1000)
        ats = [as_of] if as_of else [before, after]
        if as_of:
            b = [as_of, as_of + 1]
            mrr, _ = books.ref.series(pb.REVENUE_METRIC_MRR, b, 0, now=as_of)
            subs, _ = books.ref.series(pb.REVENUE_METRIC_ACTIVE_SUBSCRIPTIONS, b, 0, now=as_of)
            trials, _ = books.ref.series(pb.REVENUE_METRIC_ACTIVE_TRIALS, b, 0, now=as_of)
            assert (r.mrr_milliunits, r.active_subscriptions, r.active_trials) == (mrr[""][0], subs[""][0], trials[""][0])
            assert r.mrr_milliunits > 0 and r.active_subscriptions > 0
        assert r.arr_milliunits == 12 * r.mrr_milliunits
        assert (r.gross_last_30_days_milliunits, r.net_last_30_days_milliunits) in [thirty_days(at) for at in ats]
        assert r.active_grants in [grants_at(at) for at in ats]


def export(books, fmt, **kw):
    chunks = books.revenue.ExportTransactions(pb.ExportTransactionsRequest(
        start_time_ms=START, end_time_ms=END, format=fmt, **kw), timeout=60)
    return b"".join(c.data for c in chunks).decode()


def test_export_rows_and_sums_equal_the_series(books):
    text = export(books, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.split("\r\n", 1)[0]
    assert header == ("transaction_id,original_transaction_id,account_id,store,product_id,product_type,environment,ownership,"
                      "purchase_time,revocation_time,quantity,price_milliunits,currency,revocation_type,revocation_percentage,"
                      "storefront,offer_type,offer_id,paid_milliunits,refunded_milliunits,commission_percent,proceeds_milliunits")
    in_range = [t for t in books.txs if t.environment == pb.ENVIRONMENT_PRODUCTION and START <= t.purchase_time_ms < END]
    assert len(rows) == len(in_range) + 1       # and the unowned one, which no account lists
    assert {r["transaction_id"] for r in rows} >= {t.transaction_id for t in in_range}
    ids = [r["transaction_id"] for r in rows]
    assert len(set(ids)) == len(ids)       # each once, in primary-key order (the database's collation)
    gross = ask(books, pb.REVENUE_METRIC_GROSS, pb.GRANULARITY_MONTH)
    paid = sum(int(r["paid_milliunits"]) for r in rows if r["paid_milliunits"] and r["ownership"] == "PURCHASED" and r["account_id"])
    assert paid == sum(p.value for p in gross.series[0].points)
    family = [r for r in rows if r["ownership"] == "FAMILY_SHARED"]
    assert family and all(r["paid_milliunits"] == "0" and r["proceeds_milliunits"] == "0" for r in family)
    chf = [r for r in rows if r["currency"] == "CHF" and r["ownership"] == "PURCHASED" and int(r["price_milliunits"]) > 0]
    assert chf and all(r["paid_milliunits"] == "" for r in chf)
    one = next(r for r in rows if r["revocation_type"] == "REFUND_PRORATED" and r["currency"] == "USD")
    t = next(t for t in books.txs if t.transaction_id == one["transaction_id"])
    assert int(one["refunded_milliunits"]) == round_half_away(Fraction(t.price_milliunits * t.quantity * t.revocation_percentage, 100000))
    assert one["purchase_time"].endswith("Z") and "T" in one["purchase_time"]
    lines = export(books, "jsonl").strip().split("\n")
    objects = [json.loads(line) for line in lines]
    assert [o["transaction_id"] for o in objects] == [r["transaction_id"] for r in rows]
    assert sum(o["paid_milliunits"] or 0 for o in objects if o["ownership"] == "PURCHASED" and o["account_id"]) == paid


def test_bad_requests_name_the_field(books):
    cases = [
        (dict(metric=0, start_time_ms=START, end_time_ms=END), "metric"),
        (dict(metric=1, start_time_ms=END, end_time_ms=START), "end_time_ms"),
        (dict(metric=1, start_time_ms=START, end_time_ms=START + 1001 * DAY), "end_time_ms"),
        (dict(metric=1, start_time_ms=START, end_time_ms=END, currency="usd"), "currency"),
        (dict(metric=99, start_time_ms=START, end_time_ms=END), "metric"),
    ]
    for fields, field in cases:
        info = expect_error(lambda: books.revenue.GetRevenueSeries(pb.GetRevenueSeriesRequest(**fields), timeout=10),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == field, fields
    info = expect_error(lambda: list(books.revenue.ExportTransactions(pb.ExportTransactionsRequest(
        start_time_ms=START, end_time_ms=END, format="xlsx"), timeout=10)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "format"


def test_a_bad_rates_file_stops_billingd_naming_the_line(tmp_path):
    bad = tmp_path / "rates.csv"
    bad.write_text("Date,USD,JPY,\n2026-11-30,1.05,160.1,\n2026-11-27,1,05,oops\n")
    out = subprocess.run([os.environ.get("BILLINGD") or os.path.join(os.path.dirname(__file__), "..", ".build", "debug", "billingd"),
                          "--exchange-rates", str(bad), "--database", f"sqlite:{tmp_path}/b.db"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    lines = out.stderr.strip().split("\n")
    assert len(lines) == 1 and "--exchange-rates" in lines[0] and "line 3" in lines[0], out.stderr


# ---------------------------------------------------------------------------------------------------------------
# docs/REVENUE.md's worked example: these transactions, these rates, these numbers (the table there).

EXAMPLE_RATES = "Date,USD,GBP,\n2026-11-06,1.1000,0.8500,\n2026-11-02,1.1000,0.8000,\n"


def example_rows():
    def t(tid, account, product, kind, purchase, expires=0, store=1, price=0, currency="", quantity=1, offer_type="",
          original=None, revocation=0, rtype=0, pct=0):
        return dict(transaction_id=tid, original_transaction_id=original or tid, account_id=account, order_id=None, product_id=product,
                    product_kind=kind, purchase_time_ms=purchase, expires_time_ms=expires, revocation_time_ms=revocation,
                    quantity=quantity, environment=1, app_account_token=None, bundle_id=BUNDLE, signed_time_ms=purchase,
                    revocation_reason=None, store=store, ownership=1, upgraded=0, revocation_type=rtype, revocation_percentage=pct,
                    price_milliunits=price, currency=currency, storefront="", offer_id="", offer_type=offer_type,
                    subscription_group_id="g1", purchase_token="")
    sub = "auto_renewable_subscription"
    return [
        t("ex-ann-1", "ann", "pro.monthly", sub, ms(datetime(2026, 11, 1)), ms(datetime(2026, 11, 8)), currency="USD",
          offer_type="INTRODUCTORY_OFFER"),
        t("ex-ann-2", "ann", "pro.monthly", sub, ms(datetime(2026, 11, 8)), ms(datetime(2026, 12, 8)), price=4990, currency="USD",
          original="ex-ann-1"),
        t("ex-bea-1", "bea", "pro.yearly", sub, ms(datetime(2026, 11, 3, 12)), ms(datetime(2027, 11, 3, 12)), store=2, price=39990,
          currency="EUR"),
        t("ex-cal-1", "cal", "coins.100", "consumable", ms(datetime(2026, 11, 4, 9)), price=990, currency="GBP", quantity=2,
          revocation=ms(datetime(2026, 11, 10)), rtype=2, pct=50000),
        t("ex-dan-1", "dan", "pro.monthly", sub, ms(datetime(2026, 10, 5)), ms(datetime(2026, 11, 5)), price=4990, currency="USD"),
        t("ex-eve-1", "eve", "pro.monthly", sub, ms(datetime(2026, 11, 12)), ms(datetime(2026, 12, 12)), price=4990, currency="CHF"),
    ]


EXAMPLE = {  # November 2026, USD: metric -> (value, unconverted)
    "GROSS": (51702, {"CHF": 4990}),
    "REFUNDS": (1281, {}),
    "NET": (50421, {"CHF": 4990}),
    "PROCEEDS": (41893, {"CHF": 3493}),
    "MRR": (8656, {"CHF": 4990}),
    "ACTIVE_SUBSCRIPTIONS": (3, {}),
    "ACTIVE_TRIALS": (0, {}),
    "NEW_SUBSCRIPTIONS": (3, {}),
    "TRIAL_STARTS": (1, {}),
    "TRIAL_CONVERSIONS": (1, {}),
    "CHURNED_SUBSCRIPTIONS": (1, {}),
    "REFUNDED_TRANSACTIONS": (1, {}),
}


def test_the_worked_example_of_docs_revenue_md(tmp_path):
    rates = tmp_path / "rates.csv"
    rates.write_text(EXAMPLE_RATES)
    server = Billingd("--dev", "--exchange-rates", str(rates), db_dir=str(tmp_path))
    try:
        server.stop()
        con = sqlite3.connect(str(tmp_path / "billing.db"), isolation_level=None)
        names = [c.strip() for c in TX_COLUMNS.split(",")]
        con.executemany(f"INSERT INTO transactions ({TX_COLUMNS}) VALUES ({', '.join('?' * 27)})",
                        [tuple(r[n] for n in names) for r in example_rows()])
        con.close()
        server.start()
        with server.channel() as ch:
            revenue = pb_grpc.RevenueStub(ch)
            for name, (value, left) in EXAMPLE.items():
                r = revenue.GetRevenueSeries(pb.GetRevenueSeriesRequest(
                    metric=pb.RevenueMetric.Value("REVENUE_METRIC_" + name), start_time_ms=ms(datetime(2026, 11, 1)),
                    end_time_ms=ms(datetime(2026, 12, 1)), granularity=pb.GRANULARITY_MONTH), timeout=10)
                assert [p.value for p in r.series[0].points] == [value], name
                assert {m.currency: m.milliunits for m in r.unconverted} == left, name
            s = revenue.GetRevenueSummary(pb.GetRevenueSummaryRequest(as_of_time_ms=ms(datetime(2026, 12, 1))), timeout=10)
            assert (s.mrr_milliunits, s.arr_milliunits, s.active_subscriptions, s.active_trials) == (8656, 103872, 3, 0)
            assert (s.gross_last_30_days_milliunits, s.net_last_30_days_milliunits) == (51702, 50421)
        doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "REVENUE.md")).read()
        rows = {line.split("|")[1].strip().strip("`"): line for line in doc.splitlines() if line.startswith("| `")}
        for name, (value, _) in EXAMPLE.items():
            assert f"| {value} " in rows[name], f"docs/REVENUE.md's row of {name} does not show {value}"
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------------------------
# The books follow every commit: through the replica that wrote at once, through another one when its notice arrives.

@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_numbers_follow_every_commit_on_every_replica(backend, tmp_path):
    import appstore_mint as mint
    from conftest import binary
    store = str(tmp_path / "teststore")
    subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
    signer = mint.Signer(store)
    database = postgres_database() if backend == "postgres" else None
    flags = ["--dev", "--dev-store", store, "--bundle-id", BUNDLE, "--environments", "sandbox"]
    a = Billingd(*flags, db_dir=str(tmp_path), database=database)
    # PostgreSQL: a second replica on the same database (SQLite has one process).
    b = Billingd(*flags, db_dir=str(tmp_path / "b") if os.makedirs(tmp_path / "b") is None else None, database=database) if database else a
    try:
        day = NOW // DAY * DAY
        req = pb.GetRevenueSeriesRequest(metric=pb.REVENUE_METRIC_NET, start_time_ms=day - 10 * DAY, end_time_ms=day + DAY,
                                         granularity=pb.GRANULARITY_MONTH, environment=pb.ENVIRONMENT_SANDBOX)
        with a.channel() as ca, b.channel() as cb:
            ra, rb, stub = pb_grpc.RevenueStub(ca), pb_grpc.RevenueStub(cb), billing(ca)

            def net(r):
                return sum(p.value for s in r.GetRevenueSeries(req, timeout=30).series for p in s.points)

            def eventually(r, want):
                deadline = time.time() + 10
                while net(r) != want:
                    assert time.time() < deadline, f"still {net(r)}, want {want}"
                    time.sleep(0.05)

            assert net(ra) == 0 and net(rb) == 0      # both books read, empty
            signed = NOW - DAY

            def jws(tid, **kw):
                return signer.sign(mint.transaction(tid, "unlock.all", product_type="Non-Consumable", purchase_ms=signed, signed_ms=kw.pop("signed", signed),
                                                    environment="Sandbox", price=4990, currency="USD", **kw))

            stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="ann", signed_transactions=[jws("live-1"), jws("live-2")]), timeout=10)
            assert net(ra) == 9980                     # the writer's own book, before it answers again
            eventually(rb, 9980)                       # the other replica's, from the NOTIFY
            # A refund of one: a newer signed view of it.
            stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="ann", signed_transactions=[
                jws("live-2", revocation_ms=NOW - 1000, revocation_type="REFUND_FULL", signed=NOW)]), timeout=10)
            assert net(ra) == 4990
            eventually(rb, 4990)
    finally:
        if b is not a:
            b.stop()
        a.stop()


def test_connect_json_speaks_revenue(books):
    import httpx
    r = httpx.post(f"http://{books.server.address}/billing.v1.Revenue/GetRevenueSeries",
                   json={"metric": "REVENUE_METRIC_GROSS", "startTimeMs": str(START), "endTimeMs": str(END),
                         "granularity": "GRANULARITY_MONTH", "groupBy": "REVENUE_DIMENSION_STORE"}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    grpc_answer = ask(books, pb.REVENUE_METRIC_GROSS, pb.GRANULARITY_MONTH, pb.REVENUE_DIMENSION_STORE)
    assert body["currency"] == "USD"
    assert [s["group"] for s in body["series"]] == [s.group for s in grpc_answer.series]
    assert [int(p.get("value", "0")) for p in body["series"][0]["points"]] == [p.value for p in grpc_answer.series[0].points]
    bad = httpx.post(f"http://{books.server.address}/billing.v1.Revenue/GetRevenueSeries", json={"metric": "REVENUE_METRIC_GROSS"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"


def test_the_rates_file_is_read_again_on_sighup(tmp_path):
    import signal as sig
    rates = tmp_path / "rates.csv"
    rates.write_text("Date,USD,\n2026-11-02,1.1000,\n")
    server = Billingd("--dev", "--exchange-rates", str(rates), db_dir=str(tmp_path))
    try:
        server.stop()
        con = sqlite3.connect(str(tmp_path / "billing.db"), isolation_level=None)
        names = [c.strip() for c in TX_COLUMNS.split(",")]
        row = next(r for r in example_rows() if r["transaction_id"] == "ex-cal-1")  # 2 x 0.990 GBP on 11-04
        con.execute(f"INSERT INTO transactions ({TX_COLUMNS}) VALUES ({', '.join('?' * 27)})", tuple(row[n] for n in names))
        con.close()
        server.start()
        req = pb.GetRevenueSeriesRequest(metric=pb.REVENUE_METRIC_GROSS, start_time_ms=ms(datetime(2026, 11, 1)),
                                         end_time_ms=ms(datetime(2026, 12, 1)), granularity=pb.GRANULARITY_MONTH)
        with server.channel() as ch:
            revenue = pb_grpc.RevenueStub(ch)

            def gross():
                r = revenue.GetRevenueSeries(req, timeout=10)
                return r.series[0].points[0].value, {m.currency: m.milliunits for m in r.unconverted}

            assert gross() == (0, {"GBP": 1980})      # no GBP rate yet
            rates.write_text("Date,USD,GBP,\n2026-11-02,1.1000,0.8000,\n")
            server.proc.send_signal(sig.SIGHUP)
            deadline = time.time() + 10
            while gross() != (2723, {}):
                assert time.time() < deadline, gross()
                time.sleep(0.05)
            # A file that no longer parses changes nothing; the reason is logged.
            rates.write_text("Date,USD,GBP,\n2026-11-02,1.1000,zero,\n")
            server.proc.send_signal(sig.SIGHUP)
            deadline = time.time() + 10
            while "exchange rates not reloaded" not in server.log():
                assert time.time() < deadline, server.log()[-2000:]
                time.sleep(0.05)
            assert gross() == (2723, {})
            assert "line 2" in server.log()
    finally:
        server.stop()
