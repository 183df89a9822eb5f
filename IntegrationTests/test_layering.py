"""The layering of Package.swift (../shared/DESIGN.md: "Each layer depends only downwards. Only the wrapper
modules touch C."), read from `swift package dump-package`, so a new dependency that breaks it fails here.

- every target has a layer in LAYERS (test targets sit above them all);
- every dependency of a target is in a strictly lower layer;
- only the wrapper modules depend on the C system-library targets;
- the pure modules depend on no C target, and reach no transport module, directly or through others;
- the transports know no billing.

A known violation is an edge in KNOWN_VIOLATIONS, with the issue that removes it; an entry whose edge is gone
fails too, so that it is deleted when its issue is done.
"""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first; a target may depend only on targets of a lower layer. A name here that Package.swift does not
# have (yet) is fine.
LAYERS = [
    ("C system libraries", {"CNGHTTP2", "COpenSSL", "CSystem", "CLibPQ", "CSQLite", "CMicroHTTPD", "CZlib", "CCurl"}),
    ("the lifecycle kit: workers, services, waits, the monotonic clock", {"Lifecycle"}),
    ("the lowest wrappers: event loops, sockets, TLS; gzip", {"IO", "Gzip"}),
    ("pure leaves", {"ProtoWire", "Metrics", "Billing", "TestSupport"}),
    ("wire messages, the RPC core, OpenSSL, proto3 JSON, JOSE, the log", {"RPC", "BillingAPI", "Crypto", "ProtoJSON", "JOSE", "Logging"}),
    ("HTTP/2, the outbound HTTP client, signed App Store data, the stores", {"HTTP2", "HTTPClient", "AppStore", "Storage"}),
    ("the App Store Server API and Google Play Developer API, the side ports, Connect and gRPC-Web",
     {"AppStoreAPI", "GooglePlayAPI", "HTTPFront", "Connect"}),
    ("the after-sale engines: proofs, store links, notification processors, reconciliation, acknowledgement", {"AfterSale"}),
    ("billing handlers, the App Store and Google Play HTTP clients", {"BillingService", "AppStoreHTTP", "GooglePlayHTTP"}),
    ("the webhook sender (the feed over the HTTP client) and its admin methods", {"Webhooks"}),
    ("the side port's HTTP endpoints (store notifications into the after-sale engines)", {"Endpoints"}),
    ("the daemon's wiring", {"Daemon"}),
    ("the test kit (for test targets only)", {"BillingTesting"}),
    ("executables", {"billingd", "billingctl"}),
]
RANK = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}
TEST_RANK = len(LAYERS)

C_TARGETS = LAYERS[0][1]
# DESIGN.md's "may use C" modules, with IO, Gzip, HTTPClient, AppStoreHTTP and GooglePlayHTTP.
WRAPPERS = {"IO", "Gzip", "Crypto", "HTTP2", "HTTPClient", "HTTPFront", "Storage", "AppStoreHTTP", "GooglePlayHTTP"}
PURE = {"Lifecycle", "ProtoWire", "Metrics", "RPC", "BillingAPI", "Billing", "JOSE", "Logging", "AppStore", "GooglePlayAPI", "AfterSale", "BillingService"}
TRANSPORTS = {"IO", "HTTP2", "HTTPClient", "HTTPFront", "AppStoreHTTP", "GooglePlayHTTP", "Connect"}
BILLING = {"Billing", "BillingAPI", "AfterSale", "BillingService"}

# (target, dependency) -> why it is allowed for now. These edges are also not followed when checking what a
# module reaches.
KNOWN_VIOLATIONS = {}


def swift():
    """`swift` on PATH, or where scripts/test finds it."""
    return shutil.which("swift", path=os.environ.get("PATH", "") + os.pathsep + "/opt/swift/usr/bin")


@pytest.fixture(scope="module")
def package():
    """name -> (type, [dependency names]) for every target of Package.swift."""
    exe = swift()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but swift is not on PATH", pytrace=False)
        pytest.skip("swift is not on PATH")
    run = subprocess.run([exe, "package", "dump-package"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    targets = {}
    for target in json.loads(run.stdout)["targets"]:
        deps = []
        for dep in target.get("dependencies", []):
            # {"byName": [name, condition]}, {"target": [name, condition]} or {"product": [name, package, ...]}.
            (kind, value), = dep.items()
            deps.append(value[0] if kind != "product" else "product " + value[0])
        targets[target["name"]] = (target["type"], deps)
    return targets


def rank(name, targets):
    """The layer of `name`; None for a target missing from LAYERS (or a dependency from another package)."""
    if name in targets and targets[name][0] == "test":
        return TEST_RANK
    return RANK.get(name) if name in targets else None


def layer(r):
    """The name of layer `r`."""
    return LAYERS[r][0] if r < TEST_RANK else "tests"


def edges(targets):
    for name, (_, deps) in targets.items():
        for dep in deps:
            yield name, dep


def reach(name, targets, waived=KNOWN_VIOLATIONS):
    """Every target `name` depends on, directly or through others, not following the `waived` edges."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        for dep in targets[current][1]:
            if (current, dep) not in waived and dep in targets and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_every_target_has_a_layer(package):
    unknown = [name for name, (kind, _) in package.items() if kind != "test" and name not in RANK]
    assert not unknown, "; ".join(f"add target {name} to the layer table (LAYERS in this file)" for name in unknown)
    products = sorted({dep for _, dep in edges(package) if dep not in package})
    assert not products, f"dependencies outside this package, not in the layer table: {products}"
    system = {name for name, (kind, _) in package.items() if kind == "system"}
    assert system <= C_TARGETS, f"add the system-library target(s) {sorted(system - C_TARGETS)} to the C layer"
    assert not (C_TARGETS & package.keys()) - system, "only system-library targets belong to the C layer of LAYERS"


def test_dependencies_point_strictly_down(package):
    wrong = [
        f"{name} ({layer(rank(name, package))}) -> {dep} ({layer(rank(dep, package))})"
        for name, dep in edges(package)
        if None not in (rank(name, package), rank(dep, package))
        and rank(dep, package) >= rank(name, package)
        and (name, dep) not in KNOWN_VIOLATIONS
    ]
    assert not wrong, "a dependency on the same or a higher layer: " + "; ".join(wrong)


def test_only_wrappers_touch_c(package):
    wrong = [
        f"{name} -> {dep}"
        for name, dep in edges(package)
        if dep in C_TARGETS and name not in WRAPPERS and package[name][0] != "test"
    ]
    # Tests may reach C to drive a wrapper from below (HTTP2Tests writes raw HTTP/2 frames with CNGHTTP2).
    assert not wrong, f"only the wrapper modules {', '.join(sorted(WRAPPERS))} may depend on C: " + "; ".join(wrong)


def test_only_tests_use_test_support(package):
    for kit in ("TestSupport", "BillingTesting"):
        wrong = [name for name, dep in edges(package) if dep == kit and package[name][0] != "test"]
        assert not wrong, f"{kit} is for test targets only: {wrong}"


def test_pure_modules_touch_no_c_and_reach_no_transport(package):
    for name in sorted(PURE & package.keys()):
        c = [dep for dep in package[name][1] if dep in C_TARGETS]
        assert not c, f"{name} is pure and depends on the C target(s) {c}"
        transports = sorted(reach(name, package) & TRANSPORTS)
        assert not transports, f"{name} is pure and reaches the transport module(s) {transports}"


def test_transports_know_no_billing(package):
    for name in sorted(TRANSPORTS & package.keys()):
        billing = sorted(reach(name, package) & BILLING)
        assert not billing, f"{name} is a transport and reaches billing: {billing}"


def test_no_stale_known_violation(package):
    present = set(edges(package))
    stale = [f"{edge}: {why}" for edge, why in KNOWN_VIOLATIONS.items() if edge not in present]
    assert not stale, "fixed, so delete from KNOWN_VIOLATIONS in test_layering.py: " + "; ".join(stale)


def test_the_rules_see_through_other_modules(package):
    """A transport reached through another module is caught: AppStoreAPI given back its old HTTP2 dependency (issue
    20 moved the HTTP client to AppStoreHTTP) makes BillingService reach HTTP2."""
    if "AppStoreAPI" not in package or "AppStoreAPI" not in package["BillingService"][1]:
        pytest.skip("BillingService no longer depends on AppStoreAPI")
    kind, deps = package["AppStoreAPI"]
    assert "HTTP2" not in reach("BillingService", package)
    assert "HTTP2" in reach("BillingService", {**package, "AppStoreAPI": (kind, deps + ["HTTP2"])})


def test_architecture_doc_lists_every_module_with_its_dependencies(package):
    """docs/ARCHITECTURE.md's module table names every target but the C ones and the tests, with the
    dependencies Package.swift gives it (where the row lists them by name)."""
    import re
    path = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    rows = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\| `(\w+)` \| .* \|\s*([^|]*?)\s*\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    modules = {name for name, (kind, _) in package.items() if kind not in ("test", "system") and name != "TestSupport"}
    missing = sorted(modules - rows.keys())
    assert not missing, f"docs/ARCHITECTURE.md's module table lacks {missing}"
    wrong = []
    for name in sorted(modules):
        listed = rows[name]
        if not listed or not re.fullmatch(r"[A-Za-z0-9]+(, [A-Za-z0-9]+)*", listed) or listed == "Glibc":
            continue  # prose ("every module above") or none
        if set(listed.split(", ")) != set(package[name][1]):
            wrong.append(f"{name}: doc {sorted(listed.split(', '))}, Package.swift {sorted(package[name][1])}")
    assert not wrong, "docs/ARCHITECTURE.md's dependencies differ: " + "; ".join(wrong)
