import COpenSSL
import CSystem
import Glibc

/// An OpenSSL `SSL_CTX` for serving or calling with ALPN (`h2`, or `h2` and `http/1.1`); owns the handle.
public final class TLSContext: @unchecked Sendable {
    // Sendable: the SSL_CTX is configured in init and only read afterwards;
    // OpenSSL documents SSL_new on a shared, unmodified context as thread-safe.
    package let ctx: OpaquePointer

    /// The server's ALPN protocols in preference order, length-prefixed as on the wire (empty for clients).
    private let serverProtocols: [UInt8]
    /// Whether a client offering none of `serverProtocols` is refused (true when HTTP/1.1 is not among them).
    private let alpnRequired: Bool

    /// A server context: certificate chain and key (PEM), optional client CA for mutual TLS.
    ///
    /// ALPN picks the first of `alpn` (server preference) that the client offers. With the default,
    /// `["h2"]` (gRPC), a client offering something else is refused; when `http/1.1` is listed, such a
    /// client goes on without ALPN.
    public init(certificatePath: String, keyPath: String, clientCAPath: String? = nil, alpn: [String] = ["h2"]) throws(SocketError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw .tls("SSL_CTX_new failed") }
        self.ctx = ctx
        serverProtocols = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        alpnRequired = !alpn.contains("http/1.1")
        _ = copenssl_ctx_set_min_tls12(ctx)
        TLSContext.restrictTLS12Suites(ctx)
        _ = copenssl_ctx_set_partial_write(ctx)
        guard SSL_CTX_use_certificate_chain_file(ctx, certificatePath) == 1 else {
            throw .tls("cannot load certificate \(certificatePath): \(TLSContext.lastError())")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, keyPath, SSL_FILETYPE_PEM) == 1 else {
            throw .tls("cannot load key \(keyPath): \(TLSContext.lastError())")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else { throw .tls("key \(keyPath) does not match the certificate") }
        if let clientCAPath {
            guard SSL_CTX_load_verify_locations(ctx, clientCAPath, nil) == 1 else {
                throw .tls("cannot load client CA \(clientCAPath): \(TLSContext.lastError())")
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        // The context outlives every SSL made from it, so the callback may reach it unretained.
        SSL_CTX_set_alpn_select_cb(
            ctx,
            { _, out, outlen, input, inlen, arg in
                guard let input, let out, let outlen, let arg else { return SSL_TLSEXT_ERR_ALERT_FATAL }
                let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
                let offered = UnsafeBufferPointer(start: input, count: Int(inlen))
                if let (offset, length) = context.selectProtocol(offered: offered) {
                    out.pointee = input + offset
                    outlen.pointee = UInt8(length)
                    return SSL_TLSEXT_ERR_OK
                }
                return context.alpnRequired ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The first server protocol the client offers: its offset and length inside `offered` (wire format).
    private func selectProtocol(offered: UnsafeBufferPointer<UInt8>) -> (Int, Int)? {
        var s = 0
        while s < serverProtocols.count {
            let wanted = serverProtocols[(s + 1)..<(s + 1 + Int(serverProtocols[s]))]
            var i = 0
            while i < offered.count {
                let len = Int(offered[i])
                if i + 1 + len <= offered.count, offered[(i + 1)..<(i + 1 + len)].elementsEqual(wanted) { return (i + 1, len) }
                i += 1 + len
            }
            s += 1 + Int(serverProtocols[s])
        }
        return nil
    }

    /// A client context offering ALPN h2; verifies the server against `caPath` unless `insecure`.
    public init(clientCAPath caPath: String?, insecure: Bool, certificatePath: String? = nil, keyPath: String? = nil) throws(SocketError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .tls("SSL_CTX_new failed") }
        self.ctx = ctx
        serverProtocols = []
        alpnRequired = true
        _ = copenssl_ctx_set_min_tls12(ctx)
        TLSContext.restrictTLS12Suites(ctx)
        if insecure {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        } else {
            if let caPath {
                guard SSL_CTX_load_verify_locations(ctx, caPath, nil) == 1 else { throw .tls("cannot load CA \(caPath)") }
            } else {
                SSL_CTX_set_default_verify_paths(ctx)
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }
        if let certificatePath, let keyPath {
            guard SSL_CTX_use_certificate_chain_file(ctx, certificatePath) == 1,
                SSL_CTX_use_PrivateKey_file(ctx, keyPath, SSL_FILETYPE_PEM) == 1
            else {
                throw .tls("cannot load client certificate \(certificatePath)")
            }
        }
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        _ = SSL_CTX_set_alpn_protos(ctx, alpn, UInt32(alpn.count))
    }

    deinit { SSL_CTX_free(ctx) }

    /// The newest OpenSSL error as text, and the queue cleared.
    /// The TLS 1.2 suites offered and accepted: forward secrecy (ECDHE) with an AEAD cipher (AES-GCM,
    /// ChaCha20-Poly1305) only, so no static-RSA key exchange and no CBC/SHA-1 suite; ECDSA and RSA
    /// certificates both work. TLS 1.3 keeps OpenSSL's defaults (all AEAD).
    package static let tls12Suites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    private static func restrictTLS12Suites(_ ctx: OpaquePointer) {
        let ok = SSL_CTX_set_cipher_list(ctx, tls12Suites)
        precondition(ok == 1, "OpenSSL refused the TLS 1.2 suite list")
    }

    package static func lastError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown error" }
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buf, buf.count)
        let bytes = buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// One TLS session over a socket; owns the `SSL`.
package final class TLSSession {
    package let ssl: OpaquePointer

    package init(context: TLSContext, fd: Int32, server: Bool, hostname: String? = nil) throws(SocketError) {
        guard let ssl = SSL_new(context.ctx) else { throw .tls("SSL_new failed") }
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
        if server {
            SSL_set_accept_state(ssl)
        } else {
            if let hostname {
                // The certificate must name the host dialed: an IP address as an IP SAN, a name as a DNS name.
                // (Checked only when the context verifies peers; --insecure turns verification off.)
                let param = SSL_get0_param(ssl)
                if X509_VERIFY_PARAM_set1_ip_asc(param, hostname) != 1 {
                    ERR_clear_error()
                    guard SSL_set1_host(ssl, hostname) == 1 else { throw .tls("cannot verify host name \(hostname)") }
                    _ = copenssl_set_sni(ssl, hostname)
                }
            }
            SSL_set_connect_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    package enum Outcome {
        case done(Int)
        case wantRead
        case wantWrite
        case closed
        case failed(String)
    }

    private func classify(_ rc: Int32) -> Outcome {
        let err = SSL_get_error(ssl, rc)
        switch err {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            ERR_clear_error()
            return rc == 0 ? .closed : .failed("syscall: \(String(cString: strerror(errno)))")
        default:
            let message = TLSContext.lastError()
            ERR_clear_error()  // the thread's queue serves the loop's other sessions next
            return .failed(message)
        }
    }

    package func handshake() -> Outcome {
        let rc = SSL_do_handshake(ssl)
        return rc == 1 ? .done(0) : classify(rc)
    }

    package var isHandshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }

    /// The negotiated ALPN protocol, if any.
    package var alpn: String? {
        var data: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

    /// The verified peer certificate's subject, one line (mutual TLS).
    package var peerSubject: String? {
        guard let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        guard let name = X509_get_subject_name(cert), let line = X509_NAME_oneline(name, nil, 0) else { return nil }
        defer { CRYPTO_free(line, nil, 0) }
        return String(cString: line)
    }

    /// Decrypted bytes OpenSSL holds that a read returns without touching the socket.
    package var pendingBytes: Int { Int(SSL_pending(ssl)) }

    package func read(_ buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        let rc = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        return rc > 0 ? .done(Int(rc)) : classify(rc)
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard bytes.count > 0 else { return .done(0) }
        let rc = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        return rc > 0 ? .done(Int(rc)) : classify(rc)
    }

    /// Sends close_notify when the handshake is done. OpenSSL's error queue is per thread and a loop
    /// serves many sessions: whatever this leaves there (a shutdown during the handshake) is cleared, or
    /// the next session's SSL_get_error on this thread would read it as its own failure.
    package func shutdown() {
        if SSL_is_init_finished(ssl) == 1 { _ = SSL_shutdown(ssl) }
        ERR_clear_error()
    }
}
