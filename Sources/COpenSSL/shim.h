#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/cms.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/sha.h>
#include <openssl/objects.h>

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

/* STACK_OF(X509) operations are type-checking macros over OPENSSL_sk_*. */
static inline STACK_OF(X509) *copenssl_sk_x509_new(void) { return sk_X509_new_null(); }
static inline int copenssl_sk_x509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline int copenssl_sk_x509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *copenssl_sk_x509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
/// Frees the stack only; the certificates stay with their owners.
static inline void copenssl_sk_x509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
/// Frees the stack and releases one reference on each certificate.
static inline void copenssl_sk_x509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
/// BIO_get_mem_data is a macro over BIO_ctrl.
static inline long copenssl_bio_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
#endif
