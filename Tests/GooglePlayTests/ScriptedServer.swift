import Foundation
import Glibc
import HTTPClient

/// A minimal HTTPS server of this suite's own (Python's http.server over TLS, HTTP/1.1) that plays Google's token
/// endpoint and API: it answers from scripted queues per path prefix, records every request, and counts requests
/// in flight. The token endpoint answers a fresh access token unless scripted otherwise; an unscripted API path
/// answers 404 in Google's error shape.
final class ScriptedServer {
    static let script = #"""
        import json, ssl, sys, threading, time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        lock = threading.Lock()
        plans, log, state = {}, [], {"n": 0, "inflight": 0, "max": 0}
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def answer(self, status, headers, body):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                for k, v in headers.items(): self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            def handle_any(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                path = self.path
                if path == "/_plan":
                    p = json.loads(body)
                    with lock: plans.setdefault(p["prefix"], []).extend(p["answers"])
                    return self.answer(200, {}, "{}")
                if path == "/_log":
                    with lock: out = json.dumps({"log": log, "max": state["max"]})
                    return self.answer(200, {"content-type": "application/json"}, out)
                with lock:
                    log.append({"method": self.command, "path": path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                "body": body.decode("latin-1")})
                    state["inflight"] += 1
                    state["max"] = max(state["max"], state["inflight"])
                    plan = None
                    for prefix in sorted(plans, key=len, reverse=True):
                        if path.startswith(prefix) and plans[prefix]:
                            plan = plans[prefix].pop(0)
                            break
                try:
                    if plan is None and path.startswith("/token"):
                        with lock:
                            state["n"] += 1
                            n = state["n"]
                        plan = [200, {"content-type": "application/json"}, json.dumps({"access_token": "ya29.token-%d" % n, "expires_in": 3599, "token_type": "Bearer"})]
                    if plan is None:
                        plan = [404, {"content-type": "application/json"}, json.dumps({"error": {"code": 404, "message": "Not Found", "errors": [{"message": "Not Found", "domain": "global", "reason": "notFound"}], "status": "NOT_FOUND"}})]
                    if len(plan) > 3: time.sleep(plan[3])
                    self.answer(plan[0], plan[1], plan[2])
                finally:
                    with lock: state["inflight"] -= 1
            do_GET = do_POST = do_PUT = do_DELETE = handle_any
        server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        server.socket = context.wrap_socket(server.socket, server_side=True)
        print(server.server_address[1], flush=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        sys.stdin.read()
        """#

    let folder: TemporaryFolder
    let process: Process
    let input = Pipe()
    let port: Int
    let control: HTTPClient
    var caPath: String { folder.path + "/cert.pem" }
    var url: String { "https://127.0.0.1:\(port)" }

    init() throws {
        folder = try TemporaryFolder()
        let made = try run([
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", folder.path + "/key.pem",
            "-out", folder.path + "/cert.pem", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        guard made.status == 0 else { throw CocoaError(.fileWriteUnknown) }
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, folder.path + "/cert.pem", folder.path + "/key.pem"]
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line: [UInt8] = []
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte.first == 10 { break }
            line += byte
        }
        guard let p = Int(String(decoding: line, as: UTF8.self)) else { throw CocoaError(.fileReadCorruptFile) }
        port = p
        var c = HTTPClientConfiguration()
        c.extraCAPath = folder.path + "/cert.pem"
        control = try HTTPClient(configuration: c, name: "scripted-control")
    }

    func stop() {
        control.shutdown()
        // The server ends when its stdin closes. SIGKILL too: a child started from a thread that blocks SIGTERM
        // (libdispatch's) inherits that mask, so `terminate()` may never land.
        try? input.fileHandleForWriting.close()
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        folder.remove()
    }

    /// Queues answers for requests whose path starts with `prefix`: (status, headers, body[, delay seconds]).
    func plan(_ prefix: String, _ answers: [(Int, [String: String], String, Double)]) {
        let list = answers.map { a -> [Any] in [a.0, a.1, a.2, a.3] }
        let body = try! JSONSerialization.data(withJSONObject: ["prefix": prefix, "answers": list])
        _ = try! exchange(control, HTTPClientRequest(method: "POST", url: url + "/_plan", body: Array(body))).get()
    }

    /// Queues `count` copies of one answer.
    func plan(_ prefix: String, status: Int, body: String, headers: [String: String] = ["content-type": "application/json"], delay: Double = 0, count: Int = 1)
    {
        plan(prefix, Array(repeating: (status, headers, body, delay), count: count))
    }

    /// Every request so far (control requests excluded), and the most answered at once.
    func log() -> (requests: [[String: Any]], maxInFlight: Int) {
        let answer = try! exchange(control, HTTPClientRequest(url: url + "/_log")).get()
        let o = jsonObject(answer.body)
        return (o["log"] as? [[String: Any]] ?? [], o["max"] as? Int ?? 0)
    }

    /// Google's error body.
    static func googleError(_ status: Int, _ reason: String, _ message: String = "error") -> String {
        #"{"error": {"code": \#(status), "message": "\#(message)", "errors": [{"message": "\#(message)", "domain": "androidpublisher", "reason": "\#(reason)"}], "status": "X"}}"#
    }
}
