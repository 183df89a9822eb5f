"""ProtoJSON against Python protobuf's json_format, on the same descriptors: `billingctl proto-json` must write what
MessageToDict writes, and read what MessageToJson writes (JSON names, .proto names, enums as numbers, and looser
input: integers as strings or numbers, URL-safe base64, unknown members) back to the same message.

For every message type of billing.v1, billing.admin.v1, grpc.health.v1 and google.rpc (BillingDescriptors), and of
scripts/golden/jsontest.proto (every scalar type, maps, oneofs, proto3 optional, Any; through --descriptor-set), seeded
random messages: random field subsets, repeated fields of 0-3 elements, nested messages, enums (unknown numbers
too), 32- and 64-bit extremes, unicode strings, bytes, NaN and the infinities. billingctl runs once per type and
direction (--lines), so the whole test takes seconds."""
import base64
import importlib.util
import json
import math
import os
import random
import struct
import subprocess
import tempfile

import pytest
from google.protobuf import descriptor, descriptor_pool, json_format, message_factory

from conftest import ROOT, binary

SCRIPT = os.path.join(ROOT, "scripts", "golden", "make_proto_json_descriptors.py")
PER_TYPE = 100
FD = descriptor.FieldDescriptor
INT32 = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32}
UINT32 = {FD.TYPE_UINT32, FD.TYPE_FIXED32}
INT64 = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64}
UINT64 = {FD.TYPE_UINT64, FD.TYPE_FIXED64}
STRINGS = ["", "a", "order-1", "héllo wörld", "😀 emoji", "日本語", "quote \" backslash \\ slash /",
           "controls \x00\x01\x1f\n\r\t", "line\u2028separator", "\ufeffbom", "x" * 40]


def _script():
    spec = importlib.util.spec_from_file_location("make_proto_json_descriptors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sets():
    """(name, FileDescriptorSet, path of the set for --descriptor-set or None for the embedded descriptors)."""
    script = _script()
    billing = script.descriptor_set()
    test = script.descriptor_set(["jsontest.proto"], os.path.join(ROOT, "scripts", "golden"))
    path = os.path.join(tempfile.mkdtemp(prefix="proto-json-"), "jsontest.pb")
    with open(path, "wb") as f:
        f.write(test.SerializeToString())
    return [("billing", billing, None), ("jsontest", test, path)]


def test_descriptors_are_current():
    out = os.path.join(tempfile.mkdtemp(), "Descriptors.swift")
    subprocess.run(["python3", SCRIPT, out], check=True)
    with open(out) as a, open(os.path.join(ROOT, "Sources", "ProtoJSON", "Descriptors.swift")) as b:
        assert a.read() == b.read(), "Sources/ProtoJSON/Descriptors.swift is stale: run " + SCRIPT
    out = os.path.join(tempfile.mkdtemp(), "TestDescriptors.swift")
    subprocess.run(["python3", SCRIPT, "--test", out], check=True)
    with open(out) as a, open(os.path.join(ROOT, "Tests", "ProtoJSONTests", "TestDescriptors.swift")) as b:
        assert a.read() == b.read(), "Tests/ProtoJSONTests/TestDescriptors.swift is stale: run " + SCRIPT + " --test"


def _pool(fds):
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return pool


def _message_types(pool, fds):
    names = []

    def walk(prefix, messages):
        for m in messages:
            if not m.options.map_entry:
                names.append(prefix + m.name)
            walk(prefix + m.name + ".", m.nested_type)
    for f in fds.file:
        walk(f.package + "." if f.package else "", f.message_type)
    return [pool.FindMessageTypeByName(n) for n in names]


def _repeated(field):
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FD.LABEL_REPEATED


def _is_map(field):
    return field.type == FD.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


class Generator:
    """Seeded random messages of any type in `pool`."""

    def __init__(self, pool, types, seed):
        self.pool = pool
        self.rng = random.Random(seed)
        self.packable = [t for t in types if t.full_name != "google.protobuf.Any"]

    def scalar(self, field):
        r, t = self.rng, field.type
        if t in INT32:
            return r.choice([0, 1, -1, 2**31 - 1, -2**31, r.randint(-2**31, 2**31 - 1)])
        if t in UINT32:
            return r.choice([0, 1, 2**32 - 1, r.randint(0, 2**32 - 1)])
        if t in INT64:
            return r.choice([0, -1, 2**63 - 1, -2**63, 2**53 + 1, r.randint(-2**63, 2**63 - 1)])
        if t in UINT64:
            return r.choice([0, 1, 2**64 - 1, 2**63, r.randint(0, 2**64 - 1)])
        if t == FD.TYPE_BOOL:
            return r.random() < 0.5
        if t == FD.TYPE_STRING:
            return r.choice(STRINGS) + "".join(chr(r.choice([r.randint(32, 126), r.randint(0xA0, 0xD7FF), r.randint(0x10000, 0x10FFFF)]))
                                               for _ in range(r.randint(0, 4)))
        if t == FD.TYPE_BYTES:
            return bytes(r.randint(0, 255) for _ in range(r.choice([0, 1, 2, 3, 10])))
        if t == FD.TYPE_DOUBLE:
            return r.choice([0.0, -0.0, 1.5, -2.25e-300, 1e300, 5e-324, math.nan, math.inf, -math.inf, r.uniform(-1e6, 1e6)])
        if t == FD.TYPE_FLOAT:
            return r.choice([0.0, 1.5, -0.25, 3.4028234663852886e38, 1e-45, math.nan, math.inf, -math.inf, r.uniform(-1e6, 1e6)])
        if t == FD.TYPE_ENUM:
            values = [v.number for v in field.enum_type.values]
            return r.choice(values + [99] if r.random() < 0.1 else values)
        raise AssertionError(f"no generator for {field.full_name}")

    def fill(self, msg, depth):
        d = msg.DESCRIPTOR
        if d.full_name == "google.protobuf.Any":
            if depth < 3 and self.rng.random() < 0.8:
                inner = message_factory.GetMessageClass(self.rng.choice(self.packable))()
                self.fill(inner, depth + 1)
                msg.Pack(inner)
            return
        for field in d.fields:
            if self.rng.random() < 0.35:
                continue
            if _is_map(field):
                entries = getattr(msg, field.name)
                key_field, value_field = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
                for _ in range(self.rng.randint(0, 3)):
                    key = self.scalar(key_field)
                    if value_field.type == FD.TYPE_MESSAGE:
                        if depth < 4:
                            self.fill(entries[key], depth + 1)
                    else:
                        entries[key] = self.scalar(value_field)
            elif _repeated(field):
                values = getattr(msg, field.name)
                for _ in range(self.rng.randint(0, 3)):
                    if field.type == FD.TYPE_MESSAGE:
                        if depth < 4:
                            self.fill(values.add(), depth + 1)
                    else:
                        values.append(self.scalar(field))
            elif field.type == FD.TYPE_MESSAGE:
                if depth < 4:
                    getattr(msg, field.name).SetInParent()
                    self.fill(getattr(msg, field.name), depth + 1)
            else:
                setattr(msg, field.name, self.scalar(field))

    def loosen(self, d, desc):
        """A MessageToDict of `desc`, written the ways the mapping also accepts."""
        if desc.full_name == "google.protobuf.Any":
            return d
        r = self.rng
        by_json = {f.json_name: f for f in desc.fields}
        out = {}
        for key, value in d.items():
            field = by_json[key]
            name = field.name if r.random() < 0.5 else key
            if _is_map(field):
                value_field = field.message_type.fields_by_name["value"]
                out[name] = {k: self.loosen_value(v, value_field) for k, v in value.items()}
            elif _repeated(field):
                out[name] = [self.loosen_value(v, field) for v in value]
            else:
                out[name] = self.loosen_value(value, field)
            if r.random() < 0.1:
                out["zzUnknown" + str(r.randint(0, 9))] = {"nested": [1, "x", None, {"deep": True}]}
        return out

    def loosen_value(self, value, field):
        r, t = self.rng, field.type
        if t in INT64 | UINT64 and r.random() < 0.5 and abs(int(value)) < 2**53:
            return int(value)
        if t in INT32 | UINT32 and r.random() < 0.5:
            return str(value)
        if t == FD.TYPE_ENUM and isinstance(value, str) and r.random() < 0.3:
            return field.enum_type.values_by_name[value].number
        if t == FD.TYPE_BYTES and r.random() < 0.5:
            return value.replace("+", "-").replace("/", "_").rstrip("=")
        if t == FD.TYPE_MESSAGE:
            return self.loosen(value, field.message_type)
        return value


def _float32(d, desc):
    """`d` (a MessageToDict of `desc`) with float fields read as float32: json_format writes a float with at least 6
    significant digits (1.4013e-45), ProtoJSON the shortest text that reads back to the same float (1e-45)."""
    if desc.full_name == "google.protobuf.Any":
        inner = desc.file.pool.FindMessageTypeByName(d["@type"].split("/")[-1]) if "@type" in d else None
        if inner is None or inner.full_name == "google.protobuf.Any":
            return d
        return {"@type": d["@type"], **_float32({k: v for k, v in d.items() if k != "@type"}, inner)}
    by_json = {f.json_name: f for f in desc.fields}

    def one(v, field):
        if field.type == FD.TYPE_FLOAT and isinstance(v, (int, float)):
            return struct.unpack("<f", struct.pack("<f", v))[0]
        if field.type == FD.TYPE_MESSAGE:
            return _float32(v, field.message_type)
        return v
    out = {}
    for key, value in d.items():
        field = by_json[key]
        if _is_map(field):
            out[key] = {k: one(v, field.message_type.fields_by_name["value"]) for k, v in value.items()}
        elif _repeated(field):
            out[key] = [one(v, field) for v in value]
        else:
            out[key] = one(value, field)
    return out


def _run(args, lines):
    run = subprocess.run([binary("billingctl"), "proto-json", *args, "--lines"], input="".join(l + "\n" for l in lines).encode(),
                         capture_output=True, timeout=120)
    out = run.stdout.decode().split("\n")
    assert out[-1] == ""
    out = out[:-1]
    assert len(out) == len(lines), run.stderr.decode()
    return out, run.returncode, run.stderr.decode()


def _holds_any(desc, seen=None):
    """Whether messages of `desc` can hold a google.protobuf.Any, at any depth."""
    seen = seen if seen is not None else set()
    if desc.full_name == "google.protobuf.Any":
        return True
    seen.add(desc.full_name)
    return any(f.message_type is not None and f.message_type.full_name not in seen and _holds_any(f.message_type, seen)
               for f in desc.fields)


def _equal(a, b, pool):
    """Message equality; where an Any can occur, by content (its payload's map entries may come in another order)."""
    if a == b:
        return True
    return _holds_any(a.DESCRIPTOR) and \
        json_format.MessageToDict(a, descriptor_pool=pool) == json_format.MessageToDict(b, descriptor_pool=pool)


def test_every_message_type_against_json_format(sets):
    checked = set()
    for seed, (set_name, fds, path) in enumerate(sets):
        pool = _pool(fds)
        types = _message_types(pool, fds)
        extra = ["--descriptor-set", path] if path else []
        gen = Generator(pool, types, seed=20261201 + seed)
        for desc in types:
            cls = message_factory.GetMessageClass(desc)
            messages = [cls()]
            for _ in range(PER_TYPE):
                m = cls()
                gen.fill(m, 0)
                messages.append(m)

            # (1) binary -> billingctl to-json == MessageToDict.
            out, rc, err = _run(["to-json", desc.full_name, *extra], [base64.b64encode(m.SerializeToString()).decode() for m in messages])
            assert rc == 0, err + "\n".join(o for o in out if o.startswith("!"))
            for m, line in zip(messages, out):
                expected = json_format.MessageToDict(m, descriptor_pool=pool)
                assert _float32(json.loads(line), desc) == _float32(expected, desc), f"{desc.full_name}: {m}\nbillingctl: {line}\njson_format: {json.dumps(expected)}"

            # (2) MessageToJson (JSON names; .proto names; enums as numbers; loosened) -> to-binary -> the same message.
            inputs, originals = [], []
            for m in messages:
                for variant in range(4):
                    if variant == 0:
                        text = json_format.MessageToJson(m, descriptor_pool=pool)
                    elif variant == 1:
                        text = json_format.MessageToJson(m, descriptor_pool=pool, preserving_proto_field_name=True, indent=None)
                    elif variant == 2:
                        text = json_format.MessageToJson(m, descriptor_pool=pool, use_integers_for_enums=True, indent=None)
                    else:
                        loose = gen.loosen(json_format.MessageToDict(m, descriptor_pool=pool), desc)
                        text = json.dumps(loose, ensure_ascii=gen.rng.random() < 0.5)
                    inputs.append(text.replace("\n", " "))
                    originals.append(m)
            out, rc, err = _run(["to-binary", desc.full_name, *extra], inputs)
            assert rc == 0, err + "\n".join(f"{i}: {o}" for i, o in zip(inputs, out) if o.startswith("!"))
            for m, text, line in zip(originals, inputs, out):
                parsed = cls.FromString(base64.b64decode(line))
                assert _equal(parsed, m, pool), f"{desc.full_name}: {text}\nread back as {parsed}\nexpected {m}"
            checked.add(desc.full_name)
    assert {"billing.v1.Order", "billing.v1.Event", "billing.v1.SubmitReceiptRequest", "billing.admin.v1.LookUpOrderResponse",
            "grpc.health.v1.HealthCheckResponse", "google.rpc.Status", "google.rpc.ErrorInfo", "jsontest.Scalars",
            "jsontest.Maps", "jsontest.Presence", "jsontest.Holder"} <= checked, checked
