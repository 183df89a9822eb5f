"""The docs checked against the binaries: every flag docs/CONFIGURATION.md and README.md name is one that billingd (or,
where the text is about billingctl, billingctl) has; every flag of `billingd --help` is in CONFIGURATION.md's flag
tables; every reason docs/ERRORS.md lists is used by at least one test."""
import glob
import os
import re
import subprocess

from conftest import ROOT, binary

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9._-]*[a-z0-9])(-\*)?")

# Flags the pages name that belong to neither billingd nor billingctl, each with why.
OTHER_TOOLS = {
    "--strict": "swift-format lint --strict, the style check (README.md)",
}
# Words written like flags that stand for no one flag.
PLACEHOLDERS = {
    "--flag": "CONFIGURATION.md's syntax rule: `--flag value` or `--flag=value`",
}

# Reasons of docs/ERRORS.md that no test produces, each with why it cannot cheaply be produced. Empty: every reason
# is named by a test under IntegrationTests/ or Tests/ (the test below fails when one is not, and lists it).
REASONS_WITHOUT_A_TEST = {}


def help_flags(name):
    p = subprocess.run([binary(name), "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return {m.group(1) for m in FLAG.finditer(p.stdout + p.stderr)}


def billingd_flags():
    flags = help_flags("billingd")
    # Documented as "--help prints the usage and --version the version; both exit 0".
    for extra in ("--help", "--version"):
        assert subprocess.run([binary("billingd"), extra], capture_output=True, timeout=30).returncode == 0, extra
        flags.add(extra)
    return flags


def named_flags(path):
    """(line number, flag, is_prefix, whose) for every flag a page names; whose is 'billingd', 'billingctl' or None
    (another program's command line, not checked)."""
    lines = open(os.path.join(ROOT, path)).read().splitlines()
    found = []
    in_code, program, paragraph, continued = False, None, [], False

    def prose(block):
        text = " ".join(line for _, line in block)
        whose = "billingctl" if "billingctl" in text else "billingd"
        for number, line in block:
            for m in FLAG.finditer(line):
                found.append((number, m.group(1), bool(m.group(2)), whose))

    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            prose(paragraph)
            paragraph = []
            in_code, program = not in_code, None
            continue
        if in_code:
            stripped = line.strip()
            if program is None or not continued:
                words = [w for w in re.split(r"[\s|;(]+", stripped.split("#")[0]) if w and "=" not in w.split("/")[0]]
                first = os.path.basename(words[0]) if words else ""
                program = first if first in ("billingd", "billingctl") else "other"
            continued = stripped.endswith("\\")
            if program != "other":
                code = line.split(" #")[0]
                for m in FLAG.finditer(code):
                    found.append((number, m.group(1), bool(m.group(2)), program))
            continue
        continued = False
        if not line.strip() or line.startswith("|") or line.startswith("#"):
            prose(paragraph)
            paragraph = [(number, line)] if line.strip() else []
            if line.startswith("|") or line.startswith("#"):
                prose(paragraph)
                paragraph = []
            continue
        paragraph.append((number, line))
    prose(paragraph)
    return found


def test_every_flag_the_docs_name_exists():
    known = {"billingd": billingd_flags()}
    known["billingctl"] = known["billingd"] | help_flags("billingctl")
    wrong = []
    for path in ("docs/CONFIGURATION.md", "README.md"):
        for number, flag, is_prefix, whose in named_flags(path):
            if flag in OTHER_TOOLS or flag in PLACEHOLDERS:
                continue
            ok = any(k.startswith(flag + "-") for k in known[whose]) if is_prefix else flag in known[whose]
            if not ok:
                wrong.append(f"{path}:{number}: {flag}{'-*' if is_prefix else ''} is not a {whose} flag")
    assert not wrong, "\n".join(wrong)


def test_every_billingd_flag_is_in_the_configuration_tables():
    config = open(os.path.join(ROOT, "docs/CONFIGURATION.md")).read().splitlines()
    documented = set()
    for line in config:
        if line.startswith("| `--"):
            documented |= {m.group(1) for m in FLAG.finditer(line.split("|")[1])}
    missing = sorted(help_flags("billingd") - documented)
    assert not missing, f"in billingd --help but in no flag table of docs/CONFIGURATION.md: {missing}"


def test_every_error_reason_is_used_by_a_test():
    errors = open(os.path.join(ROOT, "docs/ERRORS.md")).read()
    reasons = re.findall(r"^\| `([A-Z][A-Z_]+)` \|", errors, re.M)
    assert len(reasons) >= 25, reasons
    files = [f for f in glob.glob(os.path.join(ROOT, "IntegrationTests", "**", "*.py"), recursive=True)
             if not f.endswith("test_docs_truth.py") and "/gen/" not in f]
    files += glob.glob(os.path.join(ROOT, "Tests", "**", "*.swift"), recursive=True)
    corpus = "\n".join(open(f, errors="replace").read() for f in files)
    unused = [r for r in reasons if not re.search(rf"\b{r}\b", corpus) and r not in REASONS_WITHOUT_A_TEST]
    assert not unused, f"reasons in docs/ERRORS.md that no test names: {unused}"
    stale = [r for r in REASONS_WITHOUT_A_TEST if r not in reasons or re.search(rf"\b{r}\b", corpus)]
    assert not stale, f"allow-listed reasons that are gone or now tested: {stale}"


def test_the_error_reason_type_is_the_error_table():
    """Sources/RPC/ErrorReason.swift is what the services answer and what the errors metric labels: it must name
    exactly the reasons docs/ERRORS.md documents, so no reason is answered undocumented or counted as another."""
    errors = open(os.path.join(ROOT, "docs/ERRORS.md")).read()
    table = errors.split("\n## Reasons", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z][A-Z_]+)` \|", table, re.M))
    source = open(os.path.join(ROOT, "Sources/RPC/ErrorReason.swift")).read()
    typed = set(re.findall(r'^\s*case \w+ = "([A-Z][A-Z_]+)"', source, re.M))
    assert len(typed) >= 25, typed
    assert typed == documented, (f"in ErrorReason, not in docs/ERRORS.md: {sorted(typed - documented)}; "
                                 f"documented, not in ErrorReason: {sorted(documented - typed)}")
    # No service spells a reason as a string of its own: every RPCError is made from the type.
    spelled = []
    for path in glob.glob(os.path.join(ROOT, "Sources", "**", "*.swift"), recursive=True):
        for n, line in enumerate(open(path), 1):
            if re.search(r'RPCError\(.*reason: "', line):
                spelled.append(f"{os.path.relpath(path, ROOT)}:{n}")
    assert not spelled, f"RPCErrors with a string reason: {spelled}"
