"""Connect and gRPC-Web on the gRPC port (CONFIG.md "Protocols on the gRPC port", ERRORS.md), driven by independent
clients over HTTP/1.1 and HTTP/2 (h2c prior knowledge): the connectrpc Python client (over pyqwest), httpx, curl, and
grpcio for the reference answers. Also runs the curl and Python snippets of docs/CALLING.md against a live billingd."""
import base64
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
import h2.exceptions
import httpx
import pytest
from connectrpc.client import ConnectClientSync
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.protocol import ProtocolType
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from pyqwest import HTTPVersion, SyncClient, SyncHTTPTransport

from conftest import ROOT, Billingd, binary, free_port
from helpers import billing, error_info, pb

ORIGIN = "https://app.example.com"
BUNDLE = "com.example.app"
PRODUCT = "com.example.premium"
KEY = "k-checkout"          # the API key of the keyed server (its SHA-256 is in the key file)
SUPPORT_KEY = "k-support"   # a key that may call GetOrder only
TRANSPORTS = ["http1", "http2"]
CALLING = os.path.join(ROOT, "docs", "CALLING.md")


# ---------------------------------------------------------------------------------------------------------------
# Servers


class Server:
    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="connect-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        self.metrics_port = free_port()
        self.b = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox",
                          "--metrics-listen", f"127.0.0.1:{self.metrics_port}", *flags)
        self.address = self.b.address
        self.url = f"http://{self.address}"
        self.channel = self.b.channel()
        self.stub = billing(self.channel)

    def jws(self, product=PRODUCT, **kw):
        args = [binary("billingctl"), "teststore", "transaction", "--store", self.store, "--product", product, "--bundle-id", BUNDLE]
        for k, v in kw.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def metrics(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()

    def close(self):
        self.channel.close()
        self.b.stop()
        shutil.rmtree(self.b.dir, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def srv():
    s = Server("--cors-origins", ORIGIN, "--max-message-bytes", "65536")
    yield s
    s.close()


@pytest.fixture(scope="module")
def keyed():
    keys = {"keys": [{"name": "checkout", "sha256": hashlib.sha256(KEY.encode()).hexdigest(), "methods": ["billing.v1.Billing/*"]},
                     {"name": "support", "sha256": hashlib.sha256(SUPPORT_KEY.encode()).hexdigest(),
                      "methods": ["billing.v1.Billing/GetOrder"]}]}
    d = tempfile.mkdtemp(prefix="connect-keys-")
    path = os.path.join(d, "keys.json")
    with open(path, "w") as f:
        json.dump(keys, f)
    s = Server("--api-keys", path)
    yield s
    s.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def own():
    """Servers of the test's own, with flags."""
    started = []

    def make(*flags):
        s = Server(*flags)
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


# ---------------------------------------------------------------------------------------------------------------
# Clients


class Bin:
    """connectrpc codec for grpc_tools-generated (google.protobuf) messages: binary."""

    def name(self):
        return "proto"

    def encode(self, m):
        return m.SerializeToString()

    def decode(self, data, cls):
        return cls.FromString(bytes(data))


class Js:
    """connectrpc codec for grpc_tools-generated (google.protobuf) messages: canonical proto3 JSON."""

    def name(self):
        return "json"

    def encode(self, m):
        return json_format.MessageToJson(m).encode()

    def decode(self, data, cls):
        return json_format.Parse(bytes(data), cls())


def method(name, req, res):
    return MethodInfo(name=name, service_name="billing.v1.Billing", input=req, output=res,
                      idempotency_level=IdempotencyLevel.UNKNOWN, stream_type=StreamType.UNARY)


CREATE = method("CreateOrder", pb.CreateOrderRequest, pb.CreateOrderResponse)
GET = method("GetOrder", pb.GetOrderRequest, pb.GetOrderResponse)
SUBMIT = method("SubmitReceipt", pb.SubmitReceiptRequest, pb.SubmitReceiptResponse)
PROTOCOLS = {"connect": ProtocolType.CONNECT, "grpc-web": ProtocolType.GRPC_WEB}
CODECS = {"proto": Bin, "json": Js}


def connect_client(server, transport, protocol="connect", codec="proto", gzip_on=False):
    """A connectrpc client over its own pyqwest transport: HTTP/1.1, or HTTP/2 with prior knowledge."""
    t = SyncHTTPTransport(http_version=HTTPVersion.HTTP2 if transport == "http2" else HTTPVersion.HTTP1)
    kw = {} if gzip_on else {"send_compression": None}  # connectrpc's default is gzip
    return ConnectClientSync(server.url, protocol=PROTOCOLS[protocol], codec=CODECS[codec](),
                             http_client=SyncClient(t), timeout_ms=10000, **kw)


def hx(transport):
    """httpx over HTTP/1.1, or HTTP/2 with prior knowledge (h2c)."""
    if transport == "http2":
        return httpx.Client(http1=False, http2=True, timeout=10)
    return httpx.Client(timeout=10)


def http_version(transport):
    return "HTTP/2" if transport == "http2" else "HTTP/1.1"


def curl(transport, *args):
    """curl's status, headers (lower-cased names) and body; the HTTP version it used is checked."""
    flag = "--http2-prior-knowledge" if transport == "http2" else "--http1.1"
    with tempfile.NamedTemporaryFile() as headers:
        r = subprocess.run(["curl", "-sS", flag, "-D", headers.name, "-w", "\n%{http_version} %{http_code}", *args],
                           capture_output=True, timeout=20)
        assert r.returncode == 0, r.stderr
        head = open(headers.name, "rb").read().decode()
    body, _, tail = r.stdout.rpartition(b"\n")
    version, code = tail.decode().split()
    assert version == ("2" if transport == "http2" else "1.1")
    fields = {}
    for line in head.splitlines()[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip().lower()] = v.strip()
    return int(code), fields, body


def b64decode(text):
    """Base64, padded or not (Connect and grpc-status-details-bin send it unpadded)."""
    return base64.b64decode(text + "=" * (-len(text) % 4))


def frame(message, flags=0):
    return bytes([flags]) + len(message).to_bytes(4, "big") + message


def parse_grpc_web(body):
    """gRPC-Web response body -> (messages, trailers): length-prefixed frames, the last with flag 0x80."""
    messages, trailers, i = [], None, 0
    while i < len(body):
        flags, n = body[i], int.from_bytes(body[i + 1:i + 5], "big")
        data = body[i + 5:i + 5 + n]
        assert len(data) == n, "truncated frame"
        i += 5 + n
        if flags & 0x80:
            assert trailers is None and i == len(body), "the trailer frame must come last, once"
            trailers = {}
            for line in data.decode().split("\r\n"):
                if line:
                    k, v = line.split(":", 1)
                    trailers[k.strip().lower()] = v.strip()
        else:
            assert trailers is None and flags == 0
            messages.append(data)
    assert trailers is not None, "no trailer frame"
    return messages, trailers


def grpc_order(server, account="connect"):
    """An order created over gRPC, and grpcio's GetOrder answer for it (the reference)."""
    order = server.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=PRODUCT), timeout=5).order
    return order, server.stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5)


def unknown_order_id():
    return "00000000-0000-4000-8000-000000000000"


def grpc_error(call):
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value


def info_from_value(value):
    info = error_details_pb2.ErrorInfo()
    info.ParseFromString(b64decode(value))
    return info


def check_connect_error(body, code, reason, grpc_err):
    """A Connect error body carries the code, grpcio's message and the same ErrorInfo, also as readable `debug`."""
    err = json.loads(body)
    assert err["code"] == code
    assert err["message"] == grpc_err.details()
    [detail] = err["details"]
    assert detail["type"] == "google.rpc.ErrorInfo"
    info = info_from_value(detail["value"])
    assert info == error_info(grpc_err)
    assert info.reason == reason and info.domain == "billing.v1"
    assert detail["debug"] == json_format.MessageToDict(info)
    return info


# ---------------------------------------------------------------------------------------------------------------
# Connect and gRPC-Web with the connectrpc client


def test_pyqwest_http2_transport_speaks_h2c_prior_knowledge():
    """The HTTP/2 rows below are HTTP/2: the connectrpc client's transport opens with the HTTP/2 preface."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        got = []

        def accept():
            listener.settimeout(10)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                data = b""
                while len(data) < 24:
                    chunk = conn.recv(24 - len(data))
                    if not chunk:
                        break
                    data += chunk
                got.append(data)

        t = threading.Thread(target=accept)
        t.start()
        with SyncHTTPTransport(http_version=HTTPVersion.HTTP2, timeout=3) as transport:
            client = ConnectClientSync(f"http://127.0.0.1:{port}", http_client=SyncClient(transport), codec=Bin())
            with pytest.raises(Exception):
                client.execute_unary(request=pb.CreateOrderRequest(account_id="a", product_id="p"), method=CREATE)
        t.join()
        assert got == [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]


@pytest.mark.parametrize("gzip_on", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("codec", ["proto", "json"])
@pytest.mark.parametrize("protocol", ["connect", "grpc-web"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connectrpc_client_answers_equal_grpcio(srv, transport, protocol, codec, gzip_on):
    client = connect_client(srv, transport, protocol, codec, gzip_on)
    # An order created over gRPC reads the same over this protocol.
    order, reference = grpc_order(srv)
    got = client.execute_unary(request=pb.GetOrderRequest(order_id=order.order_id), method=GET)
    assert got == reference
    # An order created over this protocol reads the same over gRPC.
    created = client.execute_unary(request=pb.CreateOrderRequest(account_id=f"c-{protocol}-{codec}", product_id=PRODUCT,
                                                                 idempotency_key=f"k-{transport}-{protocol}-{codec}-{gzip_on}"),
                                   method=CREATE).order
    assert created.state == pb.ORDER_STATE_PENDING and created.quantity == 1
    assert srv.stub.GetOrder(pb.GetOrderRequest(order_id=created.order_id), timeout=5).order == created
    # Errors: the code, the message, and the ErrorInfo that grpcio-status reads from gRPC.
    for order_id, code, reason in [("nope", Code.INVALID_ARGUMENT, "INVALID_FIELD"), (unknown_order_id(), Code.NOT_FOUND, "ORDER_NOT_FOUND")]:
        grpc_err = grpc_error(lambda: srv.stub.GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=5))
        with pytest.raises(ConnectError) as e:
            client.execute_unary(request=pb.GetOrderRequest(order_id=order_id), method=GET)
        assert e.value.code == code and e.value.message == grpc_err.details()
        [detail] = e.value.details
        assert detail.type_name == "google.rpc.ErrorInfo"
        assert error_details_pb2.ErrorInfo.FromString(detail.message_bytes) == error_info(grpc_err)
        assert error_info(grpc_err).reason == reason


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_submit_receipt_over_connect_json_completes_the_order(srv, transport):
    """A whole purchase over Connect JSON (test-store JWS), as grpcio then sees it."""
    client = connect_client(srv, transport, "connect", "json")
    order = client.execute_unary(request=pb.CreateOrderRequest(account_id=f"buyer-{transport}", product_id=PRODUCT), method=CREATE).order
    jws = srv.jws(environment="sandbox", app_account_token=order.order_id)
    answer = client.execute_unary(request=pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=jws), method=SUBMIT)
    assert answer.order.state == pb.ORDER_STATE_COMPLETED and not answer.already_processed
    again = client.execute_unary(request=pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=jws), method=SUBMIT)
    assert again.already_processed
    assert srv.stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order == again.order


# ---------------------------------------------------------------------------------------------------------------
# Connect by hand: httpx and curl


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connect_with_httpx_proto_and_json(srv, transport):
    order, reference = grpc_order(srv)
    url = f"{srv.url}/billing.v1.Billing/GetOrder"
    request = pb.GetOrderRequest(order_id=order.order_id)
    with hx(transport) as c:
        for encoding in (None, "gzip"):
            body = request.SerializeToString()
            headers = {"content-type": "application/proto", "connect-protocol-version": "1"}
            if encoding:
                body, headers["content-encoding"] = gzip.compress(body), "gzip"
            r = c.post(url, content=body, headers=headers)
            assert r.http_version == http_version(transport)
            assert r.status_code == 200 and r.headers["content-type"] == "application/proto"
            assert pb.GetOrderResponse.FromString(r.content) == reference

            body = json.dumps({"orderId": order.order_id}).encode()
            headers = {"content-type": "application/json", "connect-protocol-version": "1", "connect-timeout-ms": "5000"}
            if encoding:
                body, headers["content-encoding"] = gzip.compress(body), "gzip"
            r = c.post(url, content=body, headers=headers)
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            # The canonical proto3 JSON: what json_format writes for grpcio's answer.
            assert r.json() == json_format.MessageToDict(reference)
        # JSON input accepts the .proto field names too; no connect-protocol-version is fine.
        r = c.post(url, content=json.dumps({"order_id": order.order_id}), headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json() == json_format.MessageToDict(reference)
        # int64 as strings, enums by name.
        assert isinstance(r.json()["order"]["createTimeMs"], str) and r.json()["order"]["state"] == "ORDER_STATE_PENDING"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connect_with_curl_json(srv, transport):
    order, reference = grpc_order(srv)
    status, headers, body = curl(transport, "-H", "content-type: application/json", "-d", json.dumps({"orderId": order.order_id}),
                                 f"{srv.url}/billing.v1.Billing/GetOrder")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == json_format.MessageToDict(reference)
    status, headers, body = curl(transport, "-H", "content-type: application/json", "-d", json.dumps({"orderId": "nope"}),
                                 f"{srv.url}/billing.v1.Billing/GetOrder")
    grpc_err = grpc_error(lambda: srv.stub.GetOrder(pb.GetOrderRequest(order_id="nope"), timeout=5))
    assert status == 400
    check_connect_error(body, "invalid_argument", "INVALID_FIELD", grpc_err)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_config_md_curl_example(srv, transport):
    """CONFIG.md: `curl -H 'content-type: application/json' -d '{"accountId":"a","productId":"p"}' .../CreateOrder`
    works (no catalog: any product id), and with the --dev product."""
    for product in ("p", PRODUCT):
        status, _, body = curl(transport, "-H", "content-type: application/json", "-d", json.dumps({"accountId": "a", "productId": product}),
                               f"http://{srv.address}/billing.v1.Billing/CreateOrder")
        assert status == 200, body
        order = json.loads(body)["order"]
        assert order["accountId"] == "a" and order["productId"] == product and order["state"] == "ORDER_STATE_PENDING"
        got = srv.stub.GetOrder(pb.GetOrderRequest(order_id=order["orderId"]), timeout=5)
        assert json_format.MessageToDict(got)["order"] == order


def test_readme_curl_example(srv):
    """README.md's "Calling it" curl example, as written (but the port)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    [block] = [b for b in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S) if "curl" in b and "application/json" in b]
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block.replace("127.0.0.1:50051", srv.address)],
                       capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["order"]["state"] == "ORDER_STATE_PENDING"


# ---------------------------------------------------------------------------------------------------------------
# gRPC-Web by hand


@pytest.mark.parametrize("codec", ["proto", "json"])
@pytest.mark.parametrize("text", [False, True], ids=["binary", "text"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_grpc_web_by_hand(srv, transport, text, codec):
    order, reference = grpc_order(srv)
    kind = ("application/grpc-web-text+" if text else "application/grpc-web+") + codec

    def encode(m):
        return m.SerializeToString() if codec == "proto" else json_format.MessageToJson(m).encode()

    def call(m, path="/billing.v1.Billing/GetOrder"):
        body = frame(encode(m))
        r = c.post(srv.url + path, content=base64.b64encode(body) if text else body,
                   headers={"content-type": kind, "x-grpc-web": "1", "x-user-agent": "grpc-web-python-test"})
        assert r.http_version == http_version(transport)
        assert r.status_code == 200 and r.headers["content-type"] == kind
        return r, parse_grpc_web(base64.b64decode(r.content) if text else r.content)

    with hx(transport) as c:
        r, (messages, trailers) = call(pb.GetOrderRequest(order_id=order.order_id))
        assert trailers == {"grpc-status": "0"}
        [message] = messages
        got = pb.GetOrderResponse.FromString(message) if codec == "proto" else json_format.Parse(message, pb.GetOrderResponse())
        assert got == reference
        if codec == "json":
            assert json.loads(message) == json_format.MessageToDict(reference)
        # Errors: no message, the status in the headers and in the trailer frame, with the rich status.
        for order_id, code, reason in [("nope", 3, "INVALID_FIELD"), (unknown_order_id(), 5, "ORDER_NOT_FOUND")]:
            grpc_err = grpc_error(lambda: srv.stub.GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=5))
            r, (messages, trailers) = call(pb.GetOrderRequest(order_id=order_id))
            assert messages == []
            assert trailers["grpc-status"] == r.headers["grpc-status"] == str(code)
            assert urllib.request.unquote(trailers["grpc-message"]) == grpc_err.details()
            assert trailers["grpc-message"] == r.headers["grpc-message"]
            status = status_pb2.Status.FromString(b64decode(trailers["grpc-status-details-bin"]))
            assert status.code == code and status.message == grpc_err.details()
            info = error_details_pb2.ErrorInfo()
            assert status.details[0].Unpack(info) and info == error_info(grpc_err) and info.reason == reason
        # Unknown method: UNIMPLEMENTED.
        r, (messages, trailers) = call(pb.GetOrderRequest(), path="/billing.v1.Billing/Nope")
        assert messages == [] and trailers["grpc-status"] == "12"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_grpc_web_text_in_several_base64_chunks(srv, transport):
    """Streaming gRPC-Web clients send -text as padded base64 chunks one after another."""
    order, reference = grpc_order(srv)
    body = frame(pb.GetOrderRequest(order_id=order.order_id).SerializeToString())
    chunks = base64.b64encode(body[:4]) + base64.b64encode(body[4:])
    with hx(transport) as c:
        r = c.post(f"{srv.url}/billing.v1.Billing/GetOrder", content=chunks, headers={"content-type": "application/grpc-web-text"})
    messages, trailers = parse_grpc_web(base64.b64decode(r.content))
    assert trailers["grpc-status"] == "0" and pb.GetOrderResponse.FromString(messages[0]) == reference


# ---------------------------------------------------------------------------------------------------------------
# Errors of the Connect protocol


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connect_errors(srv, transport):
    url = f"{srv.url}/billing.v1.Billing/GetOrder"
    js = {"content-type": "application/json"}
    with hx(transport) as c:
        def post(body, headers=js, path=url):
            r = c.post(path, content=body, headers=headers)
            assert r.http_version == http_version(transport)
            return r

        # The service's own errors: HTTP status, Connect code, the same ErrorInfo as over gRPC.
        for order_id, status, code, reason in [("nope", 400, "invalid_argument", "INVALID_FIELD"),
                                               (unknown_order_id(), 404, "not_found", "ORDER_NOT_FOUND")]:
            grpc_err = grpc_error(lambda: srv.stub.GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=5))
            r = post(json.dumps({"orderId": order_id}))
            assert r.status_code == status and r.headers["content-type"] == "application/json"
            info = check_connect_error(r.content, code, reason, grpc_err)
            if reason == "INVALID_FIELD":
                assert info.metadata["field"] == "order_id"
            else:
                assert info.metadata["order_id"] == order_id
            # The proto codec answers errors as JSON too.
            r = post(pb.GetOrderRequest(order_id=order_id).SerializeToString(), headers={"content-type": "application/proto"})
            assert r.status_code == status and r.headers["content-type"] == "application/json"
            check_connect_error(r.content, code, reason, grpc_err)

        def connect_code(r, status, code):
            assert r.status_code == status, r.text
            assert r.json()["code"] == code, r.text
            return r.json()

        connect_code(post("{}", path=f"{srv.url}/billing.v1.Billing/Nope"), 501, "unimplemented")
        connect_code(post("{}", path=f"{srv.url}/made.up.Service/Nope"), 501, "unimplemented")
        # A server stream asked for with a unary content type: 415 (it takes application/connect+json), as connect-go.
        r = post("{}", path=f"{srv.url}/billing.v1.Billing/WatchEvents")
        assert r.status_code == 415 and "application/connect+json" in r.text, r.text
        # Malformed JSON, a JSON value of the wrong type, not an object, and undecodable protobuf.
        for body in ('{"orderId":', '{"orderId": 5}', "[]", "null"):
            assert "request is not a billing.v1.GetOrderRequest" in connect_code(post(body), 400, "invalid_argument")["message"]
        # Unknown JSON fields are skipped (ProtoJSON's documented leniency): the call goes on without them.
        assert connect_code(post('{"noSuchField": "x"}'), 400, "invalid_argument")["message"] == "order_id is required"
        connect_code(post(b"\xff\xff\xff", headers={"content-type": "application/proto"}), 400, "invalid_argument")
        # A malformed gzip body.
        connect_code(post(b"not gzip", headers={**js, "content-encoding": "gzip"}), 400, "invalid_argument")
        # connect-timeout-ms: at most 10 ASCII digits.
        for timeout in ("abc", "-5", "1.5", "12345678901", ""):
            body = connect_code(post("{}", headers={**js, "connect-timeout-ms": timeout}), 400, "invalid_argument")
            assert body["message"] == "malformed timeout header"
        # An unknown protocol version, an unknown content encoding.
        connect_code(post("{}", headers={**js, "connect-protocol-version": "2"}), 400, "invalid_argument")
        connect_code(post("{}", headers={**js, "content-encoding": "br"}), 501, "unimplemented")
        # Not Connect at all: HTTP's own answers.
        for content_type in ("text/plain", "application/xml", None):
            headers = {"content-type": content_type} if content_type else {}
            r = post("{}", headers=headers)
            assert r.status_code == 415 and "application/json" in r.headers["accept-post"]
        r = c.get(url)
        assert r.status_code == 405 and "POST" in r.headers["allow"]
        # Unary paths refuse Connect's streaming content types.
        assert post(b"", headers={"content-type": "application/connect+json"}).status_code == 415
        # gRPC needs HTTP/2 and its own framing: over HTTP/1.1 it is 415.
        if transport == "http1":
            assert post(b"", headers={"content-type": "application/grpc"}).status_code == 415


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_too_large(own, transport):
    s = own("--max-message-bytes", "1024")
    url = f"{s.url}/billing.v1.Billing/CreateOrder"
    js = {"content-type": "application/json"}
    over = json.dumps({"accountId": "a" * 1200, "productId": "p"}).encode()
    with hx(transport) as c:
        # Over the message limit: RESOURCE_EXHAUSTED MESSAGE_TOO_LARGE (429), as JSON, gzip or binary.
        for body, headers in [(over, js), (gzip.compress(over), {**js, "content-encoding": "gzip"}),
                              (pb.CreateOrderRequest(account_id="a" * 1200).SerializeToString(), {"content-type": "application/proto"})]:
            r = c.post(url, content=body, headers=headers)
            assert r.status_code == 429 and r.json()["code"] == "resource_exhausted", r.text
            [detail] = r.json()["details"]
            info = info_from_value(detail["value"])
            assert info.reason == "MESSAGE_TOO_LARGE" and info.metadata["limit"] == "1024"
        # A gzip body that inflates far beyond the limit stops at the limit.
        bomb = gzip.compress(b'{"accountId":"' + b"a" * 200_000 + b'"}')
        assert len(bomb) < 1024
        r = c.post(url, content=bomb, headers={**js, "content-encoding": "gzip"})
        assert r.status_code == 429 and info_from_value(r.json()["details"][0]["value"]).reason == "MESSAGE_TOO_LARGE"
        # gRPC-Web: status 8 in the trailers.
        r = c.post(url, content=frame(pb.CreateOrderRequest(account_id="a" * 1200).SerializeToString()),
                   headers={"content-type": "application/grpc-web+proto"})
        assert parse_grpc_web(r.content)[1]["grpc-status"] == "8"
        # A body far beyond what any message could need: 413 before it is read.
        r = c.post(url, content=b"x" * 100_000, headers=js)
        assert r.status_code == 413
        # Under the limit, all is well.
        r = c.post(url, content=json.dumps({"accountId": "a" * 100, "productId": "p"}), headers=js)
        assert r.status_code == 200


# ---------------------------------------------------------------------------------------------------------------
# API keys


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_api_keys(keyed, transport):
    url = f"{keyed.url}/billing.v1.Billing/CreateOrder"
    body = json.dumps({"accountId": "keyed", "productId": PRODUCT})
    js = {"content-type": "application/json"}
    with hx(transport) as c:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}, {"authorization": f"Basic {KEY}"}):
            r = c.post(url, content=body, headers={**js, **headers})
            assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
            assert info_from_value(r.json()["details"][0]["value"]).reason == "UNAUTHENTICATED"
        r = c.post(url, content=body, headers={**js, "authorization": f"Bearer {KEY}"})
        assert r.status_code == 200
        order_id = r.json()["order"]["orderId"]
        # A valid key without the method: 403 permission_denied.
        r = c.post(url, content=body, headers={**js, "authorization": f"Bearer {SUPPORT_KEY}"})
        assert r.status_code == 403 and r.json()["code"] == "permission_denied"
        r = c.post(f"{keyed.url}/billing.v1.Billing/GetOrder", content=json.dumps({"orderId": order_id}),
                   headers={**js, "authorization": f"Bearer {SUPPORT_KEY}"})
        assert r.status_code == 200 and r.json()["order"]["orderId"] == order_id
        # Health needs no key.
        r = c.post(f"{keyed.url}/grpc.health.v1.Health/Check", content="{}", headers=js)
        assert r.status_code == 200 and r.json() == {"status": "SERVING"}
        # gRPC-Web: grpc-status 16 without a key, OK with one.
        msg = frame(pb.CreateOrderRequest(account_id="keyed", product_id=PRODUCT).SerializeToString())
        r = c.post(url, content=msg, headers={"content-type": "application/grpc-web+proto"})
        assert r.headers["grpc-status"] == "16" and parse_grpc_web(r.content)[1]["grpc-status"] == "16"
        r = c.post(url, content=msg, headers={"content-type": "application/grpc-web+proto", "authorization": f"Bearer {KEY}"})
        messages, trailers = parse_grpc_web(r.content)
        assert trailers["grpc-status"] == "0" and pb.CreateOrderResponse.FromString(messages[0]).order.account_id == "keyed"
    # The connectrpc client, both protocols.
    for protocol, code in (("connect", Code.UNAUTHENTICATED), ("grpc-web", Code.UNAUTHENTICATED)):
        client = connect_client(keyed, transport, protocol)
        with pytest.raises(ConnectError) as e:
            client.execute_unary(request=pb.CreateOrderRequest(account_id="k", product_id=PRODUCT), method=CREATE)
        assert e.value.code == code
        got = client.execute_unary(request=pb.CreateOrderRequest(account_id="k", product_id=PRODUCT), method=CREATE,
                                   headers={"authorization": f"Bearer {KEY}"})
        assert got.order.account_id == "k"


# ---------------------------------------------------------------------------------------------------------------
# CORS


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cors(srv, transport):
    url = f"{srv.url}/billing.v1.Billing/CreateOrder"
    asked = "content-type,connect-protocol-version,authorization"
    with hx(transport) as c:
        r = c.options(url, headers={"origin": ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": asked})
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == ORIGIN
        assert "POST" in r.headers["access-control-allow-methods"]
        assert r.headers["access-control-allow-headers"] == asked
        assert int(r.headers["access-control-max-age"]) > 0
        assert "origin" in r.headers["vary"].lower()
        # Another origin: 403, no Allow-Origin.
        r = c.options(url, headers={"origin": "https://evil.example.com", "access-control-request-method": "POST"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        # A call from the allowed origin may be read by the page, errors included; grpc-status is exposed.
        body = json.dumps({"accountId": "web", "productId": PRODUCT})
        for path, status in (("CreateOrder", 200), ("GetOrder", 400)):
            r = c.post(f"{srv.url}/billing.v1.Billing/{path}", content=body if path == "CreateOrder" else '{"orderId":"x"}',
                       headers={"origin": ORIGIN, "content-type": "application/json"})
            assert r.status_code == status
            assert r.headers["access-control-allow-origin"] == ORIGIN
            exposed = [h.strip().lower() for h in r.headers["access-control-expose-headers"].split(",")]
            assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= set(exposed)
        r = c.post(url, content=frame(pb.CreateOrderRequest(account_id="web", product_id=PRODUCT).SerializeToString()),
                   headers={"origin": ORIGIN, "content-type": "application/grpc-web+proto"})
        assert r.headers["access-control-allow-origin"] == ORIGIN and parse_grpc_web(r.content)[1]["grpc-status"] == "0"
        # From another origin the call is answered (CORS is the browser's check) without Allow-Origin.
        r = c.post(url, content=body, headers={"origin": "https://evil.example.com", "content-type": "application/json"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_no_cors_headers_without_cors_origins(keyed):
    with hx("http1") as c:
        r = c.options(f"{keyed.url}/billing.v1.Billing/CreateOrder", headers={"origin": ORIGIN, "access-control-request-method": "POST"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers


# ---------------------------------------------------------------------------------------------------------------
# --protocols


def create_json(s, transport):
    with hx(transport) as c:
        return c.post(f"{s.url}/billing.v1.Billing/CreateOrder", content=json.dumps({"accountId": "a", "productId": "p"}),
                      headers={"content-type": "application/json"})


def create_grpc_web(s, transport):
    with hx(transport) as c:
        return c.post(f"{s.url}/billing.v1.Billing/CreateOrder",
                      content=frame(pb.CreateOrderRequest(account_id="a", product_id="p").SerializeToString()),
                      headers={"content-type": "application/grpc-web+proto"})


def test_protocols_grpc_only(own):
    s = own("--protocols", "grpc")
    assert s.stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="p"), timeout=5).order.order_id
    for call in (create_json, create_grpc_web):
        assert call(s, "http2").status_code == 415


def test_protocols_grpc_only_http1_is_415(own):
    s = own("--protocols", "grpc")
    for call in (create_json, create_grpc_web):
        assert call(s, "http1").status_code == 415


def test_protocols_connect_only_serves_connect(own):
    s = own("--protocols", "connect")
    for transport in TRANSPORTS:
        r = create_json(s, transport)
        assert r.status_code == 200 and r.json()["order"]["state"] == "ORDER_STATE_PENDING"
        assert create_grpc_web(s, transport).status_code == 415
        got = connect_client(s, transport).execute_unary(request=pb.CreateOrderRequest(account_id="a", product_id="p"), method=CREATE)
        assert got.order.order_id


def test_protocols_connect_only_refuses_grpc(own):
    s = own("--protocols", "connect")
    # The gRPC call is refused with HTTP 415, which grpcio reports as UNKNOWN.
    err = grpc_error(lambda: s.stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="p"), timeout=5))
    assert err.code() == grpc.StatusCode.UNKNOWN and "415" in err.details()
    status, _, _ = curl("http2", "-H", "content-type: application/grpc", "-H", "te: trailers",
                        "--data-binary", "@-", f"{s.url}/billing.v1.Billing/CreateOrder")
    assert status == 415


def test_protocols_flag_is_checked(tmp_path):
    r = subprocess.run([binary("billingd"), "--listen", "127.0.0.1:0", "--database", f"sqlite:{tmp_path}/x.db", "--protocols", "grpc,soap"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--protocols" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------------------------
# Metrics and the log line


def test_metrics_and_log_line(srv):
    for protocol in ("connect", "grpc-web"):
        client = connect_client(srv, "http1", protocol)
        client.execute_unary(request=pb.CreateOrderRequest(account_id=f"m-{protocol}", product_id=PRODUCT), method=CREATE)
        with pytest.raises(ConnectError):
            client.execute_unary(request=pb.GetOrderRequest(order_id=unknown_order_id()), method=GET)
    srv.stub.CreateOrder(pb.CreateOrderRequest(account_id="m-grpc", product_id=PRODUCT), timeout=5)
    text = srv.metrics()
    series = dict(re.findall(r'^(billingd_rpc_protocol_calls_total\{[^}]*\}) (\S+)$', text, re.M))
    for protocol in ("connect", "grpc-web", "grpc"):
        assert float(series[f'billingd_rpc_protocol_calls_total{{protocol="{protocol}",code="OK"}}']) >= 1
    for protocol in ("connect", "grpc-web"):
        assert float(series[f'billingd_rpc_protocol_calls_total{{protocol="{protocol}",code="NOT_FOUND"}}']) >= 1
    # The call's method series count Connect and gRPC-Web calls as well.
    assert re.search(r'^billingd_rpc_calls_total\{method="billing.v1.Billing/GetOrder",code="NOT_FOUND"\} ', text, re.M)
    deadline = time.time() + 5
    while True:
        lines = [json.loads(l) for l in srv.b.log().splitlines() if l.startswith("{")]
        rpc = [l for l in lines if l.get("msg") == "rpc"]
        mine = {l.get("protocol"): l for l in rpc if l.get("account_id", "").startswith("m-")}
        if len(mine) == 3 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert mine["connect"]["method"] == "billing.v1.Billing/CreateOrder" and mine["connect"]["code"] == "OK"
    assert mine["grpc-web"]["account_id"] == "m-grpc-web"
    assert mine[None]["account_id"] == "m-grpc"  # gRPC calls carry no protocol field
    errors = [l for l in rpc if l.get("protocol") == "connect" and l.get("reason") == "ORDER_NOT_FOUND"]
    assert errors and errors[-1]["code"] == "NOT_FOUND"


# ---------------------------------------------------------------------------------------------------------------
# docs/CALLING.md: every curl and Python snippet runs


def calling_blocks():
    """The ```sh and ```python blocks of docs/CALLING.md marked `# runnable` (or `# runnable: api-key`), in order."""
    text = open(CALLING).read()
    blocks = []
    for lang, body in re.findall(r"^```(sh|python)\n(.*?)^```", text, re.M | re.S):
        first = body.splitlines()[0].strip() if body.strip() else ""
        if first.startswith("# runnable"):
            blocks.append((lang, "api-key" in first, body))
    return text, blocks


def test_calling_md_snippets_run(srv, keyed, tmp_path):
    text, blocks = calling_blocks()
    # Every curl and Python block is runnable, and there are some of each.
    for lang, body in re.findall(r"^```(sh|python)\n(.*?)^```", text, re.M | re.S):
        if lang == "python" or "curl" in body:
            assert body.lstrip().startswith("# runnable"), f"docs/CALLING.md: a {lang} block is not marked # runnable:\n{body}"
    assert sum(1 for lang, _, b in blocks if lang == "sh" and "curl" in b) >= 4
    assert sum(1 for lang, _, _ in blocks if lang == "python") >= 3
    # They run in a scratch directory beside the schemas, as from a checkout.
    os.symlink(os.path.join(ROOT, "schemas"), tmp_path / "schemas")
    env = dict(os.environ, BILLING_API_KEY=KEY)
    if not shutil.which("protoc"):
        # protoc from grpcio-tools where no protobuf-compiler is installed.
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "protoc").write_text(f"#!/bin/sh\nexec {sys.executable} -m grpc_tools.protoc \"$@\"\n")
        (bindir / "protoc").chmod(0o755)
        env["PATH"] = f"{bindir}:{env['PATH']}"
    ran = 0
    for lang, needs_key, body in blocks:
        s = keyed if needs_key else srv
        code = body.replace("127.0.0.1:50051", s.address).replace("localhost:50051", s.address)
        if lang == "sh":
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=30)
        else:
            r = subprocess.run([sys.executable, "-"], input=code.encode(), cwd=tmp_path, env=env, capture_output=True, timeout=30)
        report = f"{lang} block:\n{code}\nexit status {r.returncode}\nstdout:\n{r.stdout.decode()}\nstderr:\n{r.stderr.decode()}"
        assert r.returncode == 0, report
        for expected in re.findall(r"^# expect: (.*)$", body, re.M):
            assert expected in r.stdout.decode(), f"'{expected}' not in the output of the {report}"
        ran += 1
    assert ran == len(blocks)


WATCH = MethodInfo(name="WatchEvents", service_name="billing.v1.Billing", input=pb.WatchEventsRequest, output=pb.Event,
                   idempotency_level=IdempotencyLevel.UNKNOWN, stream_type=StreamType.SERVER_STREAM)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("protocol", ["connect", "grpc-web"])
@pytest.mark.parametrize("codec", ["proto", "json"])
def test_watch_events_streams_over_connect_and_grpc_web(own, transport, protocol, codec):
    """WatchEvents (a server stream) over Connect's envelopes and gRPC-Web's frames: the same events, in cursor
    order, as grpcio sees; the client's deadline ends the stream with deadline_exceeded."""
    s = own()
    for _ in range(3):
        s.stub.CreateOrder(pb.CreateOrderRequest(account_id="watch", product_id="com.example.premium"), timeout=5)
    expected = [e.cursor for e in s.stub.ListEvents(pb.ListEventsRequest(after_cursor=0, limit=100), timeout=5).events]
    assert len(expected) >= 3
    t = SyncHTTPTransport(http_version=HTTPVersion.HTTP2 if transport == "http2" else HTTPVersion.HTTP1)
    client = ConnectClientSync(s.url, protocol=PROTOCOLS[protocol], codec=CODECS[codec](), http_client=SyncClient(t),
                               timeout_ms=1500, send_compression=None)
    got = []
    with pytest.raises(ConnectError) as ended:
        for event in client.execute_server_stream(request=pb.WatchEventsRequest(after_cursor=0), method=WATCH):
            got.append(event.cursor)
            if len(got) == len(expected):
                # A new event arrives live on the same stream.
                s.stub.CreateOrder(pb.CreateOrderRequest(account_id="watch", product_id="com.example.premium"), timeout=5)
    assert got[:len(expected)] == expected and len(got) == len(expected) + 1, got
    assert ended.value.code.name == "DEADLINE_EXCEEDED", ended.value


def test_watch_events_stream_by_hand_connect_json_http2(own):
    """The wire form, without a Connect library: an envelope in, envelopes and the end-of-stream message out."""
    s = own()
    s.stub.CreateOrder(pb.CreateOrderRequest(account_id="hand", product_id="com.example.premium"), timeout=5)
    request = b'{"afterCursor":"0","accountId":"hand"}'
    body = b"\x00" + len(request).to_bytes(4, "big") + request
    with hx("http2") as c:
        r = c.post(f"{s.url}/billing.v1.Billing/WatchEvents", content=body,
                   headers={"content-type": "application/connect+json", "connect-timeout-ms": "800"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/connect+json"
    data, frames = r.content, []
    while data:
        flags, n = data[0], int.from_bytes(data[1:5], "big")
        frames.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    assert frames[0][0] == 0 and frames[0][1]["accountId"] == "hand", frames
    assert frames[-1][0] == 2 and frames[-1][1]["error"]["code"] == "deadline_exceeded", frames


# ---------------------------------------------------------------------------------------------------------------
# Streams answer errors in the end-of-stream message; one in-flight limit for every protocol


def end_of_stream(body):
    """A Connect streaming body -> (messages, the end-of-stream JSON)."""
    messages, i = [], 0
    while i < len(body):
        flags, n = body[i], int.from_bytes(body[i + 1:i + 5], "big")
        data = body[i + 5:i + 5 + n]
        i += 5 + n
        if flags & 0x02:
            assert i == len(body), "the end-of-stream message comes last"
            return messages, json.loads(data)
        messages.append(data)
    raise AssertionError("no end-of-stream message")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_watch_events_with_a_unary_content_type_is_415(srv, transport):
    """connect-go answers a streaming procedure called with application/json or application/proto 415."""
    with hx(transport) as c:
        for content_type in ("application/json", "application/proto"):
            r = c.post(f"{srv.url}/billing.v1.Billing/WatchEvents", content=b"{}", headers={"content-type": content_type})
            assert r.status_code == 415, (content_type, r.status_code, r.text)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_watch_events_without_a_key_is_200_with_unauthenticated_in_the_end_of_stream(keyed, transport):
    """The Connect protocol: a streaming call's error is HTTP 200 and the end-of-stream message (an HTTP 401 would
    be a broken transport to a Connect client)."""
    request = b'{"afterCursor":"0"}'
    with hx(transport) as c:
        for headers in ({}, {"authorization": "Bearer wrong"}):
            r = c.post(f"{keyed.url}/billing.v1.Billing/WatchEvents", content=frame(request),
                       headers={"content-type": "application/connect+json", **headers})
            assert r.status_code == 200 and r.headers["content-type"] == "application/connect+json", (r.status_code, r.text)
            messages, end = end_of_stream(r.content)
            assert messages == [] and end["error"]["code"] == "unauthenticated", end
            [detail] = end["error"]["details"]
            assert info_from_value(detail["value"]).reason == "UNAUTHENTICATED"
        # The proto codec the same (the end-of-stream message is JSON in both).
        r = c.post(f"{keyed.url}/billing.v1.Billing/WatchEvents", content=frame(pb.WatchEventsRequest().SerializeToString()),
                   headers={"content-type": "application/connect+proto"})
        assert r.status_code == 200 and end_of_stream(r.content)[1]["error"]["code"] == "unauthenticated"
        # A key that may not call it: permission_denied, the same way.
        r = c.post(f"{keyed.url}/billing.v1.Billing/WatchEvents", content=frame(request),
                   headers={"content-type": "application/connect+json", "authorization": f"Bearer {SUPPORT_KEY}"})
        assert r.status_code == 200 and end_of_stream(r.content)[1]["error"]["code"] == "permission_denied"
        # A malformed timeout: invalid_argument in the end-of-stream message too.
        r = c.post(f"{keyed.url}/billing.v1.Billing/WatchEvents", content=frame(request),
                   headers={"content-type": "application/connect+json", "connect-timeout-ms": "x",
                            "authorization": f"Bearer {KEY}"})
        assert r.status_code == 200 and end_of_stream(r.content)[1]["error"]["code"] == "invalid_argument"
    # The connectrpc client reads it as the call's status, not as a transport failure.
    client = connect_client(keyed, transport, "connect")
    with pytest.raises(ConnectError) as e:
        list(client.execute_server_stream(request=pb.WatchEventsRequest(after_cursor=0), method=WATCH))
    assert e.value.code == Code.UNAUTHENTICATED, e.value
    got = []
    with pytest.raises(ConnectError) as e:
        for event in client.execute_server_stream(request=pb.WatchEventsRequest(after_cursor=0), method=WATCH,
                                                  headers={"authorization": f"Bearer {KEY}"}, timeout_ms=800):
            got.append(event)
    assert e.value.code == Code.DEADLINE_EXCEEDED, e.value


def in_flight(server):
    line = next(l for l in server.metrics().splitlines() if l.startswith("billingd_rpc_in_flight "))
    return float(line.split()[1])


def test_max_in_flight_is_one_limit_for_grpc_connect_and_grpc_web(own):
    """--max-in-flight 8 and 16 long calls (WatchEvents streams, which hold their slot until they end) mixed over
    gRPC, Connect and gRPC-Web: exactly 8 run, the other 8 answer RESOURCE_EXHAUSTED OVERLOADED, whatever their
    protocol, and billingd_rpc_in_flight reads 8. Before, each protocol family had a count of its own (up to 16 ran)."""
    s = own("--max-in-flight", "8")
    request = pb.WatchEventsRequest(after_cursor=0)
    results, lock = [], threading.Lock()
    open_streams = []

    def note(protocol, outcome):
        with lock:
            results.append((protocol, outcome))

    def run_grpc():
        call = s.stub.WatchEvents(request, timeout=30)
        open_streams.append(call)
        try:
            for _ in call:
                pass
            note("grpc", "ended")
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                return
            note("grpc", "overloaded" if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and error_info(e).reason == "OVERLOADED"
                 else f"other {e.code()}")

    def run_http(protocol):
        content_type = "application/connect+proto" if protocol == "connect" else "application/grpc-web+proto"
        with httpx.Client(http1=False, http2=True, timeout=30) as c:
            with c.stream("POST", f"{s.url}/billing.v1.Billing/WatchEvents", content=frame(request.SerializeToString()),
                          headers={"content-type": content_type}) as r:
                assert r.status_code == 200
                data = b""
                try:
                    for chunk in r.iter_bytes():
                        data += chunk
                        # A refused call ends at once with its status; an admitted one stays open, sending nothing.
                        if protocol == "connect" and len(data) >= 5 and data[0] & 0x02:
                            break
                        if protocol == "grpc-web" and len(data) >= 5 and data[0] & 0x80:
                            break
                except (httpx.HTTPError, h2.exceptions.ProtocolError):
                    if not data:
                        return  # an admitted stream, open until the test's server stops
                    raise
                if protocol == "connect":
                    end = end_of_stream(data)[1]
                    ok = end.get("error", {}).get("code") == "resource_exhausted" and \
                        info_from_value(end["error"]["details"][0]["value"]).reason == "OVERLOADED"
                else:
                    trailers = parse_grpc_web(data)[1]
                    status = status_pb2.Status.FromString(b64decode(trailers["grpc-status-details-bin"]))
                    info = error_details_pb2.ErrorInfo()
                    ok = trailers["grpc-status"] == "8" and status.details[0].Unpack(info) and info.reason == "OVERLOADED"
                note(protocol, "overloaded" if ok else f"other {data[:200]!r}")

    plan = ["grpc", "connect", "grpc-web"] * 5 + ["grpc"]
    threads = []
    for i, protocol in enumerate(plan):
        th = threading.Thread(target=run_grpc if protocol == "grpc" else run_http, args=() if protocol == "grpc" else (protocol,),
                              daemon=True)
        th.start()
        threads.append(th)
    deadline = time.time() + 20
    while time.time() < deadline and len(results) < 8:
        time.sleep(0.05)
    time.sleep(0.3)  # nothing more is refused: the 8 admitted stay open
    with lock:
        outcomes = list(results)
    assert len(outcomes) == 8 and all(o == "overloaded" for _, o in outcomes), outcomes
    assert in_flight(s) == 8
    # An admitted call of each kind really runs: a new event reaches every open stream (not checked here), and a
    # unary call is refused while the 8 hold their slots.
    err = grpc_error(lambda: s.stub.GetOrder(pb.GetOrderRequest(order_id=unknown_order_id()), timeout=5))
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and error_info(err).reason == "OVERLOADED"
    with hx("http1") as c:
        r = c.post(f"{s.url}/billing.v1.Billing/GetOrder", content=json.dumps({"orderId": unknown_order_id()}),
                   headers={"content-type": "application/json"})
        assert r.status_code == 429 and r.json()["code"] == "resource_exhausted", r.text
    for call in open_streams:
        call.cancel()
