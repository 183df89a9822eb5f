import Crypto
import Foundation
import GooglePlayAPI
import HTTPClient
import Synchronization
import Lifecycle

/// What a helper process printed and how it ended.
struct ProcessResult {
    var status: Int32
    var output: String
}

/// Runs a tool (openssl, python3) with a hard time limit; stdout comes back, `input` goes to stdin.
func run(_ arguments: [String], input: [UInt8] = [], seconds: Double = 30) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let out = Pipe()
    let inPipe = Pipe()
    process.standardOutput = out
    process.standardInput = inPipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    inPipe.fileHandleForWriting.write(Data(input))
    try? inPipe.fileHandleForWriting.close()
    let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: killer)
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    killer.cancel()
    return ProcessResult(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
}

/// A temporary folder, removed by `remove()`.
struct TemporaryFolder {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "googleplay-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// base64url without padding.
func b64url(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// Decodes base64url (padded or not).
func unb64url(_ s: Substring) -> [UInt8] {
    var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while t.count % 4 != 0 { t += "=" }
    return Array(Data(base64Encoded: t) ?? Data())
}

/// A JSON object's text as a dictionary (Foundation: an independent reader).
func jsonObject(_ bytes: [UInt8]) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
}

/// One RSA key for the whole suite (generation is the slow part).
let suiteKey: PrivateKey = try! PrivateKey.generateRSA()

/// A service-account key file's JSON, Google's format.
func keyFileJSON(
    email: String = "billingd@fake-project.iam.gserviceaccount.com", keyID: String = "0123456789abcdef", tokenURI: String, key: PrivateKey = suiteKey
)
    -> String
{
    let escaped = key.pem().replacingOccurrences(of: "\n", with: "\\n")
    return """
        {"type": "service_account", "project_id": "fake-project", "private_key_id": "\(keyID)", "private_key": "\(escaped)",
         "client_email": "\(email)", "client_id": "1234567890", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
         "token_uri": "\(tokenURI)", "universe_domain": "googleapis.com"}
        """
}

/// Sends through `client` and waits for the answer.
func exchange(_ client: HTTPClient, _ request: HTTPClientRequest) -> Result<HTTPClientResponse, HTTPClientError> {
    guard let answer = Blocking.wait(timeout: .seconds(30), { client.send(request, completion: $0) }) else {
        preconditionFailure("no answer within 30 s")
    }
    return answer
}

/// The RSA modulus of a PEM key file as OpenSSL's CLI prints it (an independent source for JWK `n`).
func opensslModulus(_ keyFile: String) throws -> [UInt8] {
    let hex = Array(try run(["openssl", "rsa", "-in", keyFile, "-noout", "-modulus"]).output.split(separator: "=").last!.utf8.filter { $0 > 32 })
    return stride(from: 0, to: hex.count - 1, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! }
}
