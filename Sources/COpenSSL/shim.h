#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/pem.h>

/// SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl.
static inline int copenssl_ctx_set_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
/// SSL_CTX_set_mode is a macro over SSL_CTX_ctrl.
static inline long copenssl_ctx_set_partial_write(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
/// SSL_set_tlsext_host_name is a macro over SSL_ctrl.
static inline long copenssl_set_sni(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
#endif
