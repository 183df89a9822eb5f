"""Raw HTTP/2 against billingd with the `h2` package: framing edge cases a stock client never sends.
After each case, the same server must still answer a grpcio call."""
import hashlib
import json
import socket
import struct
import uuid
from urllib.parse import unquote

import grpc

import h2.config
import h2.connection
import h2.errors
import h2.events
from grpc_health.v1 import health_pb2, health_pb2_grpc

from helpers import billing, expect_error, pb

GRPC_HEADERS = [("content-type", "application/grpc"), ("te", "trailers")]


class RawConnection:
    def __init__(self, address, validate=True):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        # validate=False sends headers as some clients do (whitespace, connection-specific fields).
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8", validate_outbound_headers=validate, normalize_outbound_headers=validate))
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, content_type="application/grpc", extra=()):
        sid = self.conn.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "billingd"),
                   ("content-type", content_type), ("te", "trailers"), *extra]
        self.conn.send_headers(sid, headers)
        self.flush()
        return sid

    def send(self, sid, data, end=False):
        self.conn.send_data(sid, data, end_stream=end)
        self.flush()

    def collect(self, sid):
        """Reads until the stream ends or is reset: (headers, data, trailers, reset_code)."""
        headers, trailers, data, reset = {}, {}, b"", None
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return headers, data, trailers, "closed"
            for event in self.conn.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == sid:
                    headers = dict(event.headers)
                elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == sid:
                    trailers = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == sid:
                    data += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length, sid)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == sid:
                    reset = event.error_code
                    self.flush()
                    return headers, data, trailers, reset
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == sid:
                    self.flush()
                    return headers, data, trailers, reset
            self.flush()

    def close(self):
        self.conn.close_connection()
        self.flush()
        self.sock.close()


def frame(message: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(message)) + message


def status_of(headers, trailers):
    return int((trailers or headers).get("grpc-status", "-1"))


def still_serving(server):
    with server.channel() as ch:
        assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING


def test_message_split_across_many_data_frames(server):
    raw = RawConnection(server.address)
    body = frame(pb.CreateOrderRequest(account_id="raw-1", product_id="com.example.premium").SerializeToString())
    sid = raw.request("/billing.v1.Billing/CreateOrder")
    for i in range(len(body)):
        raw.send(sid, body[i:i + 1], end=(i == len(body) - 1))
    headers, data, trailers, reset = raw.collect(sid)
    assert headers[":status"] == "200" and headers["content-type"].startswith("application/grpc")
    assert trailers["grpc-status"] == "0"
    assert data[0] == 0 and struct.unpack(">I", data[1:5])[0] == len(data) - 5
    order = pb.CreateOrderResponse.FromString(data[5:]).order
    assert order.account_id == "raw-1"
    raw.close()
    still_serving(server)


def test_empty_data_frames_and_end_in_separate_frame(server):
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/GetOrder")
    body = frame(pb.GetOrderRequest(order_id=str(uuid.uuid4())).SerializeToString())
    raw.send(sid, b"")
    raw.send(sid, body)
    raw.send(sid, b"", end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 5  # NOT_FOUND
    raw.close()
    still_serving(server)


def test_bad_length_prefix(server):
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/CreateOrder")
    raw.send(sid, b"\x00\x00\x00\x00\x50" + b"short", end=True)  # claims 80 bytes, sends 5
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 13  # INTERNAL
    assert data == b""
    raw.close()
    still_serving(server)


def test_no_message_at_all(server):
    raw = RawConnection(server.address)
    sid = raw.request("/grpc.health.v1.Health/Check")
    raw.send(sid, b"", end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 13
    raw.close()
    still_serving(server)


def test_wrong_content_type(server):
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/CreateOrder", content_type="text/plain")
    raw.send(sid, b"{}", end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert headers[":status"] == "415"
    # A content type another protocol knows is that protocol's call: application/json is Connect.
    sid = raw.request("/billing.v1.Billing/CreateOrder", content_type="application/json")
    raw.send(sid, b"{}", end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert headers[":status"] == "400" and b'"code":"invalid_argument"' in data, (headers, data)
    raw.close()
    still_serving(server)


def test_unknown_method(server):
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/DoesNotExist")
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert headers[":status"] == "200"
    assert status_of(headers, trailers) == 12  # UNIMPLEMENTED, trailers-only
    assert headers.get("content-type", "").startswith("application/grpc")
    raw.close()
    still_serving(server)


def test_client_reset_stream(server):
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/CreateOrder")
    raw.send(sid, b"\x00\x00\x00")  # half a prefix, then give up
    raw.conn.reset_stream(sid)
    raw.flush()
    # The connection itself keeps working after the reset.
    sid2 = raw.request("/grpc.health.v1.Health/Check")
    raw.send(sid2, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid2)
    assert trailers["grpc-status"] == "0"
    raw.close()
    still_serving(server)


def test_oversize_message_answered_before_body(fresh):
    s = fresh("--max-message-bytes", "100")
    raw = RawConnection(s.address)
    sid = raw.request("/billing.v1.Billing/CreateOrder")
    raw.send(sid, b"\x00" + struct.pack(">I", 10_000_000))  # prefix only; the body never comes
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 8  # RESOURCE_EXHAUSTED
    assert "grpc-status-details-bin" in headers
    raw.close()
    still_serving(s)


def test_grpc_timeout_malformed(server):
    raw = RawConnection(server.address)
    sid = raw.request("/grpc.health.v1.Health/Check", extra=[("grpc-timeout", "forever")])
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 13
    raw.close()
    still_serving(server)


def test_garbage_preface(server):
    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        try:
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
    still_serving(server)


def keyed(fresh, tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{"name": "k", "sha256": hashlib.sha256(b"k1").hexdigest(), "methods": ["*"]}]}))
    return fresh("--api-keys", str(path))


def test_whitespace_and_connection_headers_get_an_answer(fresh, tmp_path):
    s = keyed(fresh, tmp_path)
    raw = RawConnection(s.address, validate=False)
    body = frame(pb.GetOrderRequest(order_id=str(uuid.uuid4())).SerializeToString())
    for extra in ([("authorization", "Bearer ")], [("authorization", " Bearer k1 ")], [("x-note", "\tpadded\t")]):
        sid = raw.request("/billing.v1.Billing/GetOrder", extra=extra)
        raw.send(sid, body, end=True)
        headers, data, trailers, reset = raw.collect(sid)
        assert reset is None, (extra, reset)
        code = status_of(headers, trailers)
        if extra[0][1] == " Bearer k1 ":
            assert code == 5, extra  # the key is good once trimmed, as grpc-go reads it: NOT_FOUND
        else:
            assert code in (16, 5), (extra, code)
            assert extra[0][0] != "authorization" or code == 16
    # Connection-specific fields (some HTTP stacks add `connection: keep-alive`) and names that are not lowercase
    # tokens are skipped and the call answered, as grpc-go 1.33 answers them (bench/README.md, HTTP/2 edge cases).
    for extra in ([("connection", "keep-alive")], [("keep-alive", "timeout=5")], [("transfer-encoding", "chunked")],
                  [("upgrade", "h2c")], [("X-Upper", "1")]):
        sid = raw.request("/billing.v1.Billing/GetOrder", extra=extra + [("authorization", "Bearer k1")])
        raw.send(sid, body, end=True)
        headers, data, trailers, reset = raw.collect(sid)
        assert reset is None, (extra, reset)
        assert status_of(headers, trailers) == 5, extra  # authenticated, the order is unknown: NOT_FOUND
    sid = raw.request("/grpc.health.v1.Health/Check")
    raw.send(sid, frame(b""), end=True)
    assert raw.collect(sid)[2]["grpc-status"] == "0"
    raw.close()
    # grpcio sends an empty bearer token with its trailing space.
    with s.channel() as ch:
        expect_error(lambda: billing(ch).GetOrder(pb.GetOrderRequest(order_id=str(uuid.uuid4())), timeout=5,
                                                  metadata=[("authorization", "Bearer ")]),
                     grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    still_serving(s)


def test_header_list_over_the_limit_is_answered(fresh):
    s = fresh("--max-header-list-bytes", "2048")
    raw = RawConnection(s.address)
    sid = raw.request("/grpc.health.v1.Health/Check", extra=[("x-big", "v" * 4000)])
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert reset is None
    assert headers.get(":status") == "431" or status_of(headers, trailers) == 8  # RESOURCE_EXHAUSTED
    # The connection goes on.
    sid = raw.request("/grpc.health.v1.Health/Check")
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert trailers["grpc-status"] == "0"
    raw.close()
    still_serving(s)


def test_grpc_message_is_capped(fresh):
    server = fresh("--max-header-list-bytes", "131072")
    raw = RawConnection(server.address)
    sid = raw.request("/billing.v1.Billing/" + "X" * 60_000)
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    assert status_of(headers, trailers) == 12
    message = (trailers or headers)["grpc-message"]
    assert 0 < len(unquote(message).encode()) <= 1024
    # Multi-byte text is cut on a character boundary: the capped message still decodes as UTF-8.
    sid = raw.request("/billing.v1." + "é" * 3000 + "/X")
    raw.send(sid, frame(b""), end=True)
    headers, data, trailers, reset = raw.collect(sid)
    message = (trailers or headers)["grpc-message"]
    assert 0 < len(unquote(message, errors="strict").encode()) <= 1024
    raw.close()
    still_serving(server)


def test_http1_request_answered_in_http1(server):
    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /billing.v1.Billing/GetOrder HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        sock.settimeout(5)
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
    # HTTP/1.1 reaches the Connect and gRPC-Web gateway: a request with no content type is 415.
    assert answer.startswith(b"HTTP/1.1 415 "), answer[:40]
    still_serving(server)


def test_malformed_requests_are_reset_and_the_connection_serves_on(server):
    """RFC 9113 8.1.1: a malformed request gets RST_STREAM PROTOCOL_ERROR; the connection keeps serving."""
    raw = RawConnection(server.address, validate=False)
    cases = {
        "no :path": [(":method", "POST"), (":scheme", "http"), (":authority", "b")],
        "no :scheme": [(":method", "POST"), (":path", "/grpc.health.v1.Health/Check")],
        "pseudo-field after a regular one": [(":method", "POST"), ("content-type", "application/grpc"), (":scheme", "http"),
                                             (":path", "/grpc.health.v1.Health/Check")],
        "repeated :path": [(":method", "POST"), (":scheme", "http"), (":path", "/a"), (":path", "/grpc.health.v1.Health/Check")],
        "unknown pseudo-field": [(":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"), (":status", "200")],
        "NUL in a value": [(":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"), ("x-note", "a\x00b")],
    }
    for name, headers in cases.items():
        sid = raw.conn.get_next_available_stream_id()
        raw.conn.send_headers(sid, headers + [("te", "trailers")], end_stream=True)
        raw.flush()
        assert raw.collect(sid)[3] == h2.errors.ErrorCodes.PROTOCOL_ERROR, name
    # Trailers that do not end the request are malformed too.
    sid = raw.request("/grpc.health.v1.Health/Check")
    block = raw.conn.encoder.encode([("x-trailer", "1")])  # h2 refuses to send this itself: a raw HEADERS frame
    raw.sock.sendall(struct.pack(">I", len(block))[1:] + bytes([0x1, 0x4]) + struct.pack(">I", sid) + block)
    assert raw.collect(sid)[3] == h2.errors.ErrorCodes.PROTOCOL_ERROR
    sid = raw.request("/grpc.health.v1.Health/Check")
    raw.send(sid, frame(b""), end=True)
    assert raw.collect(sid)[2]["grpc-status"] == "0"
    raw.close()
