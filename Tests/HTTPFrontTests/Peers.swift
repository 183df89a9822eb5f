import Foundation
import Glibc
import HTTPFront
import Synchronization

/// What an independent client saw.
struct PeerResult {
    var exitCode: Int32
    var output: String
}

/// Runs a client process (curl, python3) with a hard time limit; its stdout comes back.
func runPeer(_ arguments: [String], seconds: Double = 20) throws -> PeerResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: killer)
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    killer.cancel()
    return PeerResult(exitCode: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
}

/// curl printing `STATUS VERSION` then the body: `-w` puts the status line last, so split it off.
func curl(_ arguments: [String]) throws -> (status: Int, version: String, body: String) {
    let r = try runPeer(["curl", "-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code} %{http_version}"] + arguments)
    let lines = r.output.split(separator: "\n", omittingEmptySubsequences: false)
    let last = lines.last.map(String.init) ?? ""
    let parts = last.split(separator: " ")
    return (Int(parts.first ?? "") ?? 0, parts.count > 1 ? String(parts[1]) : "", lines.dropLast().joined(separator: "\n"))
}

/// A Python `http.client` script against `address` (`HOST:PORT` split into `host`, `port`).
func python(_ address: String, _ script: String) throws -> String {
    let colon = address.lastIndex(of: ":")!
    let prelude = "import http.client, socket, sys, time\nhost = '\(address[..<colon])'\nport = \(address[address.index(after: colon)...])\n"
    return try runPeer(["python3", "-c", prelude + script]).output.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A raw TCP client that connects and then says nothing (or what it is told to).
final class RawClient {
    let fd: Int32

    init(_ address: String) {
        let colon = address.lastIndex(of: ":")!
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = in_port_t(UInt16(address[address.index(after: colon)...])!).bigEndian
        inet_pton(AF_INET, String(address[..<colon]), &sin.sin_addr)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        _ = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }

    deinit { close(fd) }

    func send(_ text: String) { _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }

    /// True once the server closed the connection (read returns 0 or fails) within `seconds`.
    func closedByServer(within seconds: Int) -> Bool {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return true }
            if n < 0 { return false }
        }
    }
}

/// A self-signed certificate for 127.0.0.1 made by the openssl CLI in a temporary folder.
struct TestCertificate {
    let directory: String
    var certificate: String { directory + "/cert.pem" }
    var key: String { directory + "/key.pem" }

    init() throws {
        directory = NSTemporaryDirectory() + "httpfront-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try runPeer([
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ])
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
