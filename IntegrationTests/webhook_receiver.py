"""A webhook receiver for tests: verifies every request with the `standardwebhooks` package (the Standard Webhooks
reference library), records what it accepted in order, and can be told to fail (answer 500 the next N times, or
hang past billingd's 10 s attempt limit), go down (stop listening) and come back on the same port, over HTTP or
HTTPS."""
import base64
import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks


def new_secret():
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


class Receiver:
    def __init__(self, secret, tls=False, port=0):
        self.secret = secret
        self.hook = standardwebhooks.Webhook(secret)
        self.lock = threading.Lock()
        self.accepted = []        # (webhook-id, payload dict, received time) in arrival order, 2xx answered
        self.attempts = []        # every request: (webhook-id or None, status answered)
        self.fail_next = 0        # answer 500 to this many requests
        self.bad_signatures = 0
        self.connections = []     # open connections, closed by down()
        self.tls_dir = None
        if tls:
            self.tls_dir = tempfile.mkdtemp(prefix="webhook-tls-")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{self.tls_dir}/key.pem", "-out", f"{self.tls_dir}/cert.pem", "-days", "1",
                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        self.port = port
        self.server = None
        self.up()

    @property
    def ca(self):
        return f"{self.tls_dir}/cert.pem" if self.tls_dir else None

    @property
    def url(self):
        return f"{'https' if self.tls_dir else 'http'}://127.0.0.1:{self.port}/hooks/billing"

    def up(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with receiver.lock:
                    receiver.connections.append(self.connection)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                wid = self.headers.get("webhook-id")
                with receiver.lock:
                    fail = receiver.fail_next > 0
                    if fail:
                        receiver.fail_next -= 1
                if fail:
                    return self.answer(500, wid)
                try:
                    payload = receiver.hook.verify(body, {k: v for k, v in self.headers.items()})
                except Exception:
                    with receiver.lock:
                        receiver.bad_signatures += 1
                    return self.answer(401, wid)
                with receiver.lock:
                    receiver.accepted.append((wid, payload, time.time(), dict(self.headers.items())))
                self.answer(204, wid)

            def answer(self, status, wid):
                with receiver.lock:
                    receiver.attempts.append((wid, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        if self.tls_dir:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(f"{self.tls_dir}/cert.pem", f"{self.tls_dir}/key.pem")
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def down(self):
        """Stops listening (connections refused) until up()."""
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        with self.lock:
            connections, self.connections = self.connections, []
        for c in connections:  # kept-alive connections too: down means nothing answers
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def ids(self):
        with self.lock:
            return [a[0] for a in self.accepted]

    def cursors(self):
        return [int(i[len("evt_"):]) for i in self.ids()]

    def wait_for(self, n, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.accepted) >= n:
                    return True
            time.sleep(0.02)
        return False
