"""Bounds on what a peer can grow: metric series, request buffers, queued database work, and a
GOAWAY before the connection ends. Each test prints what it measured."""
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.request

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings

from conftest import Billingd, free_port
from helpers import billing, error_info, pb


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def call_code(channel, path, metadata=()):
    try:
        channel.unary_unary(path)(b"", timeout=5, metadata=list(metadata))
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def test_unknown_methods_share_one_series_and_meet_the_key_check_first(tmp_path):
    keys = {"keys": [{"name": "ops", "sha256": hashlib.sha256(b"k-ops").hexdigest(), "methods": ["*"]},
                     {"name": "shop", "sha256": hashlib.sha256(b"k-shop").hexdigest(), "methods": ["billing.v1.Billing/*"]}]}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    port = free_port()
    s = Billingd("--api-keys", str(path), "--metrics-listen", f"127.0.0.1:{port}", "--log-level", "warning")
    try:
        before = len(scrape(port))
        with s.channel() as ch:
            # Without a key, an unknown method is UNAUTHENTICATED: the key check comes before routing.
            assert call_code(ch, "/made.up.Service/Nope") == grpc.StatusCode.UNAUTHENTICATED
            assert call_code(ch, "/grpc.health.v1.Health/Nope") == grpc.StatusCode.UNAUTHENTICATED
            assert call_code(ch, "/made.up.Service/Nope", [("authorization", "Bearer k-shop")]) == grpc.StatusCode.PERMISSION_DENIED
            assert call_code(ch, "/made.up.Service/Nope", [("authorization", "Bearer k-ops")]) == grpc.StatusCode.UNIMPLEMENTED
            assert call_code(ch, "/billing.v1.Billing/Nope", [("authorization", "Bearer k-shop")]) == grpc.StatusCode.UNIMPLEMENTED
            for i in range(1500):
                assert call_code(ch, f"/made.up.Service{i}/Method{i}") == grpc.StatusCode.UNAUTHENTICATED
            for i in range(1500):
                assert call_code(ch, f"/other.Service{i}/M{i}", [("authorization", "Bearer k-ops")]) == grpc.StatusCode.UNIMPLEMENTED
        text = scrape(port)
        print(f"/metrics: {before} bytes before, {len(text)} bytes after 3,000 made-up method paths")
        assert "made.up" not in text and "other.Service" not in text
        assert 'billingd_rpc_calls_total{method="unknown",code="UNAUTHENTICATED"} 1502' in text
        assert 'billingd_rpc_calls_total{method="unknown",code="UNIMPLEMENTED"} 1502' in text
        assert 'billingd_rpc_errors_total{method="unknown",reason="UNAUTHENTICATED"} 1502' in text
        assert 'billingd_rpc_calls_total{method="billing.v1.Billing/Nope"' not in text
        assert len(text) < before + 16 * 1024
    finally:
        s.stop()
