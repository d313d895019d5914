/* net/tls.c - TLS on non-blocking sockets with OpenSSL 3 (see tls.h, docs/internals/net.md).
 *
 * Shape: one SSL_CTX per context, built once and shared read-only; one SSL per connection with a
 * plain socket BIO on the caller's fd (a client's SSL is reset and kept in its thread's cache
 * when the connection ends cleanly, for the next connection of the same context). Read-ahead stays
 * off, so OpenSSL reads the socket one record at a time and never holds ciphertext the poller
 * cannot see. Writes are all-or-nothing (no partial-write mode) with moving buffers allowed, which
 * is what lets a caller retry an EAGAIN'd write from a copy of the same bytes.
 *
 * Resumption (client): the context keeps no session cache of its own; a new-session callback
 * puts each session a server issues into the connection's sq_tls_sessions (one per worker
 * thread, no lock), and the next connection of that thread offers the newest. TLS 1.3 tickets
 * are single-use (OpenSSL's client marks a ticket spent once a handshake resumed with it), so
 * the cache is a stack: a ticket leaves it when offered, and every handshake brings a new one
 * (the server sends one per handshake). TLS 1.3 tickets arrive after the handshake, with the
 * first read, so the first connections of a run are full handshakes and the reconnects after
 * them resume.
 */
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/dynlib.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* OpenSSL is not linked: it is opened (base/dynlib.h) by sq_tls_client_new and
 * sq_tls_server_new, the only ways to a TLS object, so a run without TLS maps neither libssl nor
 * libcrypto (1.7 MB of resident pages and 23,000 relocations at start, docs/benchmarks.md).
 * X(library, function): every OpenSSL function this file calls (`nm -u` on tls.c.o; the
 * macros of the headers expand to these, and calls through them go through the table). */
#define OSSL_SYMS(X)                                                                               \
    X(CRYPTO, BIO_clear_flags)                                                                     \
    X(CRYPTO, BIO_ctrl)                                                                            \
    X(CRYPTO, BIO_free)                                                                            \
    X(CRYPTO, BIO_int_ctrl)                                                                        \
    X(CRYPTO, BIO_meth_free)                                                                       \
    X(CRYPTO, BIO_meth_get_create)                                                                 \
    X(CRYPTO, BIO_meth_get_ctrl)                                                                   \
    X(CRYPTO, BIO_meth_get_destroy)                                                                \
    X(CRYPTO, BIO_meth_get_puts)                                                                   \
    X(CRYPTO, BIO_meth_get_read)                                                                   \
    X(CRYPTO, BIO_meth_new)                                                                        \
    X(CRYPTO, BIO_meth_set_create)                                                                 \
    X(CRYPTO, BIO_meth_set_ctrl)                                                                   \
    X(CRYPTO, BIO_meth_set_destroy)                                                                \
    X(CRYPTO, BIO_meth_set_puts)                                                                   \
    X(CRYPTO, BIO_meth_set_read)                                                                   \
    X(CRYPTO, BIO_meth_set_write)                                                                  \
    X(CRYPTO, BIO_new)                                                                             \
    X(CRYPTO, BIO_s_mem)                                                                           \
    X(CRYPTO, BIO_s_socket)                                                                        \
    X(CRYPTO, BIO_set_flags)                                                                       \
    X(CRYPTO, BIO_sock_should_retry)                                                               \
    X(CRYPTO, BN_free)                                                                             \
    X(CRYPTO, BN_new)                                                                              \
    X(CRYPTO, BN_rand)                                                                             \
    X(CRYPTO, BN_to_ASN1_INTEGER)                                                                  \
    X(CRYPTO, CRYPTO_get_ex_new_index)                                                             \
    X(CRYPTO, ERR_clear_error)                                                                     \
    X(CRYPTO, ERR_error_string_n)                                                                  \
    X(CRYPTO, ERR_peek_error)                                                                      \
    X(CRYPTO, ERR_reason_error_string)                                                             \
    X(CRYPTO, EVP_PKEY_Q_keygen)                                                                   \
    X(CRYPTO, EVP_PKEY_free)                                                                       \
    X(CRYPTO, EVP_sha256)                                                                          \
    X(CRYPTO, OPENSSL_cleanse)                                                                     \
    X(CRYPTO, OPENSSL_sk_pop_free)                                                                 \
    X(CRYPTO, PEM_write_X509)                                                                      \
    X(CRYPTO, PEM_write_bio_PrivateKey)                                                            \
    X(CRYPTO, PEM_write_bio_X509)                                                                  \
    X(SSL, SSL_CIPHER_get_name)                                                                    \
    X(SSL, SSL_CTX_check_private_key)                                                              \
    X(SSL, SSL_CTX_ctrl)                                                                           \
    X(SSL, SSL_CTX_free)                                                                           \
    X(SSL, SSL_CTX_get0_certificate)                                                               \
    X(SSL, SSL_CTX_get0_param)                                                                     \
    X(SSL, SSL_CTX_get0_privatekey)                                                                \
    X(SSL, SSL_CTX_load_verify_locations)                                                          \
    X(SSL, SSL_CTX_new)                                                                            \
    X(SSL, SSL_CTX_sess_set_new_cb)                                                                \
    X(SSL, SSL_CTX_set_alpn_protos)                                                                \
    X(SSL, SSL_CTX_set_alpn_select_cb)                                                             \
    X(SSL, SSL_CTX_set_cipher_list)                                                                \
    X(SSL, SSL_CTX_set_ciphersuites)                                                               \
    X(SSL, SSL_CTX_set_client_CA_list)                                                             \
    X(SSL, SSL_CTX_set_default_verify_paths)                                                       \
    X(SSL, SSL_CTX_set_num_tickets)                                                                \
    X(SSL, SSL_CTX_set_options)                                                                    \
    X(SSL, SSL_CTX_set_session_id_context)                                                         \
    X(SSL, SSL_CTX_set_verify)                                                                     \
    X(SSL, SSL_CTX_use_PrivateKey)                                                                 \
    X(SSL, SSL_CTX_use_PrivateKey_file)                                                            \
    X(SSL, SSL_CTX_use_certificate)                                                                \
    X(SSL, SSL_CTX_use_certificate_chain_file)                                                     \
    X(SSL, SSL_SESSION_free)                                                                       \
    X(SSL, SSL_SESSION_get_protocol_version)                                                       \
    X(SSL, SSL_SESSION_is_resumable)                                                               \
    X(SSL, SSL_clear)                                                                              \
    X(SSL, SSL_ctrl)                                                                               \
    X(SSL, SSL_do_handshake)                                                                       \
    X(SSL, SSL_free)                                                                               \
    X(SSL, SSL_get0_alpn_selected)                                                                 \
    X(SSL, SSL_get_SSL_CTX)                                                                        \
    X(SSL, SSL_get_current_cipher)                                                                 \
    X(SSL, SSL_get_error)                                                                          \
    X(SSL, SSL_get_ex_data)                                                                        \
    X(SSL, SSL_get_ex_data_X509_STORE_CTX_idx)                                                     \
    X(SSL, SSL_get_verify_result)                                                                  \
    X(SSL, SSL_get_version)                                                                        \
    X(SSL, SSL_has_pending)                                                                        \
    X(SSL, SSL_is_init_finished)                                                                   \
    X(SSL, SSL_load_client_CA_file)                                                                \
    X(SSL, SSL_new)                                                                                \
    X(SSL, SSL_pending)                                                                            \
    X(SSL, SSL_read)                                                                               \
    X(SSL, SSL_select_next_proto)                                                                  \
    X(SSL, SSL_session_reused)                                                                     \
    X(SSL, SSL_set_accept_state)                                                                   \
    X(SSL, SSL_set_bio)                                                                            \
    X(SSL, SSL_set_connect_state)                                                                  \
    X(SSL, SSL_set_ex_data)                                                                        \
    X(SSL, SSL_set_read_ahead)                                                                     \
    X(SSL, SSL_set_session)                                                                        \
    X(SSL, SSL_set_shutdown)                                                                       \
    X(SSL, SSL_shutdown)                                                                           \
    X(SSL, SSL_write)                                                                              \
    X(SSL, TLS_client_method)                                                                      \
    X(SSL, TLS_server_method)                                                                      \
    X(CRYPTO, X509V3_EXT_conf_nid)                                                                 \
    X(CRYPTO, X509V3_set_ctx)                                                                      \
    X(CRYPTO, X509_EXTENSION_free)                                                                 \
    X(CRYPTO, X509_NAME_add_entry_by_txt)                                                          \
    X(CRYPTO, X509_NAME_free)                                                                      \
    X(CRYPTO, X509_NAME_print_ex)                                                                  \
    X(CRYPTO, X509_STORE_CTX_get_current_cert)                                                     \
    X(CRYPTO, X509_STORE_CTX_get_error_depth)                                                      \
    X(CRYPTO, X509_STORE_CTX_get_ex_data)                                                          \
    X(CRYPTO, X509_VERIFY_PARAM_set1_host)                                                         \
    X(CRYPTO, X509_VERIFY_PARAM_set1_ip_asc)                                                       \
    X(CRYPTO, X509_VERIFY_PARAM_set_hostflags)                                                     \
    X(CRYPTO, X509_add_ext)                                                                        \
    X(CRYPTO, X509_free)                                                                           \
    X(CRYPTO, X509_get_serialNumber)                                                               \
    X(CRYPTO, X509_get_subject_name)                                                               \
    X(CRYPTO, X509_getm_notAfter)                                                                  \
    X(CRYPTO, X509_getm_notBefore)                                                                 \
    X(CRYPTO, X509_gmtime_adj)                                                                     \
    X(CRYPTO, X509_new)                                                                            \
    X(CRYPTO, X509_set_issuer_name)                                                                \
    X(CRYPTO, X509_set_pubkey)                                                                     \
    X(CRYPTO, X509_set_version)                                                                    \
    X(CRYPTO, X509_sign)                                                                           \
    X(CRYPTO, X509_verify_cert_error_string)
enum { LIB_CRYPTO, LIB_SSL, NLIBS };
static const char *const sonames[NLIBS] = {SQ_SONAME_CRYPTO, SQ_SONAME_SSL}; /* CMakeLists.txt */

static struct {
#define OSSL_FIELD(lib, sym) __typeof__(sym) *sym;
    OSSL_SYMS(OSSL_FIELD)
#undef OSSL_FIELD
} ossl;

static const struct sq_dynlib_sym ossl_syms[] = {
#define OSSL_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(__typeof__(ossl), sym)},
    OSSL_SYMS(OSSL_ENTRY)
#undef OSSL_ENTRY
};

static struct sq_dynlib ossl_libs = {
    .what = "TLS",
    .hint = "scripts/deps.sh installs libssl-dev",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = ossl_syms,
    .nsyms = sizeof(ossl_syms) / sizeof(ossl_syms[0]),
    .table = &ossl,
    .table_size = sizeof(ossl),
};

#define BIO_clear_flags                    (ossl.BIO_clear_flags)
#define BIO_ctrl                           (ossl.BIO_ctrl)
#define BIO_free                           (ossl.BIO_free)
#define BIO_int_ctrl                       (ossl.BIO_int_ctrl)
#define BIO_meth_free                      (ossl.BIO_meth_free)
#define BIO_meth_get_create                (ossl.BIO_meth_get_create)
#define BIO_meth_get_ctrl                  (ossl.BIO_meth_get_ctrl)
#define BIO_meth_get_destroy               (ossl.BIO_meth_get_destroy)
#define BIO_meth_get_puts                  (ossl.BIO_meth_get_puts)
#define BIO_meth_get_read                  (ossl.BIO_meth_get_read)
#define BIO_meth_new                       (ossl.BIO_meth_new)
#define BIO_meth_set_create                (ossl.BIO_meth_set_create)
#define BIO_meth_set_ctrl                  (ossl.BIO_meth_set_ctrl)
#define BIO_meth_set_destroy               (ossl.BIO_meth_set_destroy)
#define BIO_meth_set_puts                  (ossl.BIO_meth_set_puts)
#define BIO_meth_set_read                  (ossl.BIO_meth_set_read)
#define BIO_meth_set_write                 (ossl.BIO_meth_set_write)
#define BIO_new                            (ossl.BIO_new)
#define BIO_s_mem                          (ossl.BIO_s_mem)
#define BIO_s_socket                       (ossl.BIO_s_socket)
#define BIO_set_flags                      (ossl.BIO_set_flags)
#define BIO_sock_should_retry              (ossl.BIO_sock_should_retry)
#define BN_free                            (ossl.BN_free)
#define BN_new                             (ossl.BN_new)
#define BN_rand                            (ossl.BN_rand)
#define BN_to_ASN1_INTEGER                 (ossl.BN_to_ASN1_INTEGER)
#define CRYPTO_get_ex_new_index            (ossl.CRYPTO_get_ex_new_index)
#define ERR_clear_error                    (ossl.ERR_clear_error)
#define ERR_error_string_n                 (ossl.ERR_error_string_n)
#define ERR_peek_error                     (ossl.ERR_peek_error)
#define ERR_reason_error_string            (ossl.ERR_reason_error_string)
#define EVP_PKEY_Q_keygen                  (ossl.EVP_PKEY_Q_keygen)
#define EVP_PKEY_free                      (ossl.EVP_PKEY_free)
#define EVP_sha256                         (ossl.EVP_sha256)
#define OPENSSL_cleanse                    (ossl.OPENSSL_cleanse)
#define OPENSSL_sk_pop_free                (ossl.OPENSSL_sk_pop_free)
#define PEM_write_X509                     (ossl.PEM_write_X509)
#define PEM_write_bio_PrivateKey           (ossl.PEM_write_bio_PrivateKey)
#define PEM_write_bio_X509                 (ossl.PEM_write_bio_X509)
#define SSL_CIPHER_get_name                (ossl.SSL_CIPHER_get_name)
#define SSL_CTX_check_private_key          (ossl.SSL_CTX_check_private_key)
#define SSL_CTX_ctrl                       (ossl.SSL_CTX_ctrl)
#define SSL_CTX_free                       (ossl.SSL_CTX_free)
#define SSL_CTX_get0_certificate           (ossl.SSL_CTX_get0_certificate)
#define SSL_CTX_get0_param                 (ossl.SSL_CTX_get0_param)
#define SSL_CTX_get0_privatekey            (ossl.SSL_CTX_get0_privatekey)
#define SSL_CTX_load_verify_locations      (ossl.SSL_CTX_load_verify_locations)
#define SSL_CTX_new                        (ossl.SSL_CTX_new)
#define SSL_CTX_sess_set_new_cb            (ossl.SSL_CTX_sess_set_new_cb)
#define SSL_CTX_set_alpn_protos            (ossl.SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_alpn_select_cb         (ossl.SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_cipher_list            (ossl.SSL_CTX_set_cipher_list)
#define SSL_CTX_set_ciphersuites           (ossl.SSL_CTX_set_ciphersuites)
#define SSL_CTX_set_client_CA_list         (ossl.SSL_CTX_set_client_CA_list)
#define SSL_CTX_set_default_verify_paths   (ossl.SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_num_tickets            (ossl.SSL_CTX_set_num_tickets)
#define SSL_CTX_set_options                (ossl.SSL_CTX_set_options)
#define SSL_CTX_set_session_id_context     (ossl.SSL_CTX_set_session_id_context)
#define SSL_CTX_set_verify                 (ossl.SSL_CTX_set_verify)
#define SSL_CTX_use_PrivateKey             (ossl.SSL_CTX_use_PrivateKey)
#define SSL_CTX_use_PrivateKey_file        (ossl.SSL_CTX_use_PrivateKey_file)
#define SSL_CTX_use_certificate            (ossl.SSL_CTX_use_certificate)
#define SSL_CTX_use_certificate_chain_file (ossl.SSL_CTX_use_certificate_chain_file)
#define SSL_SESSION_free                   (ossl.SSL_SESSION_free)
#define SSL_SESSION_get_protocol_version   (ossl.SSL_SESSION_get_protocol_version)
#define SSL_SESSION_is_resumable           (ossl.SSL_SESSION_is_resumable)
#define SSL_clear                          (ossl.SSL_clear)
#define SSL_ctrl                           (ossl.SSL_ctrl)
#define SSL_do_handshake                   (ossl.SSL_do_handshake)
#define SSL_free                           (ossl.SSL_free)
#define SSL_get0_alpn_selected             (ossl.SSL_get0_alpn_selected)
#define SSL_get_SSL_CTX                    (ossl.SSL_get_SSL_CTX)
#define SSL_get_current_cipher             (ossl.SSL_get_current_cipher)
#define SSL_get_error                      (ossl.SSL_get_error)
#define SSL_get_ex_data                    (ossl.SSL_get_ex_data)
#define SSL_get_ex_data_X509_STORE_CTX_idx (ossl.SSL_get_ex_data_X509_STORE_CTX_idx)
#define SSL_get_verify_result              (ossl.SSL_get_verify_result)
#define SSL_get_version                    (ossl.SSL_get_version)
#define SSL_has_pending                    (ossl.SSL_has_pending)
#define SSL_is_init_finished               (ossl.SSL_is_init_finished)
#define SSL_load_client_CA_file            (ossl.SSL_load_client_CA_file)
#define SSL_new                            (ossl.SSL_new)
#define SSL_pending                        (ossl.SSL_pending)
#define SSL_read                           (ossl.SSL_read)
#define SSL_select_next_proto              (ossl.SSL_select_next_proto)
#define SSL_session_reused                 (ossl.SSL_session_reused)
#define SSL_set_accept_state               (ossl.SSL_set_accept_state)
#define SSL_set_bio                        (ossl.SSL_set_bio)
#define SSL_set_connect_state              (ossl.SSL_set_connect_state)
#define SSL_set_ex_data                    (ossl.SSL_set_ex_data)
#define SSL_set_read_ahead                 (ossl.SSL_set_read_ahead)
#define SSL_set_session                    (ossl.SSL_set_session)
#define SSL_set_shutdown                   (ossl.SSL_set_shutdown)
#define SSL_shutdown                       (ossl.SSL_shutdown)
#define SSL_write                          (ossl.SSL_write)
#define TLS_client_method                  (ossl.TLS_client_method)
#define TLS_server_method                  (ossl.TLS_server_method)
#define X509V3_EXT_conf_nid                (ossl.X509V3_EXT_conf_nid)
#define X509V3_set_ctx                     (ossl.X509V3_set_ctx)
#define X509_EXTENSION_free                (ossl.X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt         (ossl.X509_NAME_add_entry_by_txt)
#define X509_NAME_free                     (ossl.X509_NAME_free)
#define X509_NAME_print_ex                 (ossl.X509_NAME_print_ex)
#define X509_STORE_CTX_get_current_cert    (ossl.X509_STORE_CTX_get_current_cert)
#define X509_STORE_CTX_get_error_depth     (ossl.X509_STORE_CTX_get_error_depth)
#define X509_STORE_CTX_get_ex_data         (ossl.X509_STORE_CTX_get_ex_data)
#define X509_VERIFY_PARAM_set1_host        (ossl.X509_VERIFY_PARAM_set1_host)
#define X509_VERIFY_PARAM_set1_ip_asc      (ossl.X509_VERIFY_PARAM_set1_ip_asc)
#define X509_VERIFY_PARAM_set_hostflags    (ossl.X509_VERIFY_PARAM_set_hostflags)
#define X509_add_ext                       (ossl.X509_add_ext)
#define X509_free                          (ossl.X509_free)
#define X509_get_serialNumber              (ossl.X509_get_serialNumber)
#define X509_get_subject_name              (ossl.X509_get_subject_name)
#define X509_getm_notAfter                 (ossl.X509_getm_notAfter)
#define X509_getm_notBefore                (ossl.X509_getm_notBefore)
#define X509_gmtime_adj                    (ossl.X509_gmtime_adj)
#define X509_new                           (ossl.X509_new)
#define X509_set_issuer_name               (ossl.X509_set_issuer_name)
#define X509_set_pubkey                    (ossl.X509_set_pubkey)
#define X509_set_version                   (ossl.X509_set_version)
#define X509_sign                          (ossl.X509_sign)
#define X509_verify_cert_error_string      (ossl.X509_verify_cert_error_string)

#define MAX_PROTOS 8

/* ALPN protocols: the wire form OpenSSL takes, and each name as a C string (what
 * sq_tls_alpn returns, so it outlives the connection). */
struct protos {
    unsigned char wire[256];
    unsigned wire_len;
    char names[MAX_PROTOS][32];
    int n;
    bool has_h1;
    char list[128]; /* as given, for messages */
};

struct sq_tls_client {
    SSL_CTX *ctx;
    struct protos alpn;
    bool alpn_required;
    bool sni; /* host is a name (not an IP literal): send it */
    char host[256];
};

struct sq_tls_server {
    SSL_CTX *ctx;
    struct protos alpn;
};

struct sq_tls_conn {
    SSL *ssl;
    const struct protos *alpn;
    const struct sq_tls_client *client; /* NULL on the server side */
    struct sq_tls_sessions *cache;
    bool want_write;
    bool failed; /* a fatal error: no close_notify, and the SSL is not kept for reuse */
    bool shut;   /* close_notify sent (or tried) */
    int vdepth;  /* the first certificate that failed verification: depth, or -1 */
    char vsubj[96];
    char err[SQ_TLS_ERRLEN];
};

static int ex_index_once(void);

/* ---- small helpers ---- */

static void msg(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msg(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* The reason of one queued OpenSSL error, as text. */
static const char *reason_of(unsigned long e, char *tmp, size_t len)
{
    if (e == 0)
        return "unknown error";
    if (ERR_SYSTEM_ERROR(e))
        return strerror(ERR_GET_REASON(e));
    const char *r = ERR_reason_error_string(e);
    if (r)
        return r;
    ERR_error_string_n(e, tmp, len);
    return tmp;
}

/* The earliest queued error's reason; empties the queue. */
static const char *take_reason(unsigned long *code, char *tmp, size_t len)
{
    unsigned long e = ERR_peek_error();
    const char *r = reason_of(e, tmp, len);
    if (code)
        *code = e;
    ERR_clear_error();
    return r;
}

int sq_tls_version_parse(const char *s)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "1.2") == 0)
        return TLS1_2_VERSION;
    if (strcmp(s, "1.3") == 0)
        return TLS1_3_VERSION;
    return -EINVAL;
}

static int set_versions(SSL_CTX *ctx, const char *min, const char *max, char *err, size_t errlen)
{
    int lo = min ? sq_tls_version_parse(min) : TLS1_2_VERSION;
    int hi = max ? sq_tls_version_parse(max) : TLS1_3_VERSION;
    if (lo < 0 || hi < 0) {
        msg(err, errlen, "%s '%s' is not a TLS version (1.2 or 1.3)",
            lo < 0 ? "min_version" : "max_version", lo < 0 ? min : max);
        return -EINVAL;
    }
    if (lo > hi) {
        msg(err, errlen, "min_version %s is above max_version %s", min ? min : "1.2",
            max ? max : "1.3");
        return -EINVAL;
    }
    if (!SSL_CTX_set_min_proto_version(ctx, lo) || !SSL_CTX_set_max_proto_version(ctx, hi)) {
        msg(err, errlen, "cannot set the TLS versions");
        ERR_clear_error();
        return -EINVAL;
    }
    return 0;
}

/* Parses "h2,http/1.1" into p. */
static int parse_protos(const char *list, struct protos *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (!list)
        list = "http/1.1";
    snprintf(p->list, sizeof(p->list), "%s", list);
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n >= sizeof(p->names[0]) || p->n == MAX_PROTOS ||
            p->wire_len + 1 + n > sizeof(p->wire)) {
            msg(err, errlen, "alpn '%s': want up to %d comma-separated names of 1..31 bytes", list,
                MAX_PROTOS);
            return -EINVAL;
        }
        memcpy(p->names[p->n], s, n);
        p->names[p->n][n] = '\0';
        p->has_h1 |= strcmp(p->names[p->n], "http/1.1") == 0;
        p->wire[p->wire_len++] = (unsigned char)n;
        memcpy(p->wire + p->wire_len, s, n);
        p->wire_len += (unsigned)n;
        p->n++;
        s += n;
        if (*s == ',')
            s++;
    }
    if (p->n == 0) {
        msg(err, errlen, "alpn: empty list");
        return -EINVAL;
    }
    return 0;
}

/* The name in p that equals wire bytes sel[0, len), or "". */
static const char *proto_name(const struct protos *p, const unsigned char *sel, unsigned len)
{
    for (int i = 0; i < p->n; i++)
        if (strlen(p->names[i]) == len && memcmp(p->names[i], sel, len) == 0)
            return p->names[i];
    return "";
}

/* A readable file, or a message naming the option and why not. */
static int check_file(const char *what, const char *path, char *err, size_t errlen)
{
    if (access(path, R_OK) == 0)
        return 0;
    msg(err, errlen, "%s '%s': %s", what, path, strerror(errno));
    return -EINVAL;
}

/* Formats a certificate's subject as "CN=localhost,O=..." (RFC 2253 order). */
static void subject_of(X509 *x, char *out, size_t len)
{
    snprintf(out, len, "unknown subject");
    if (!x)
        return;
    BIO *b = BIO_new(BIO_s_mem());
    if (!b)
        return;
    if (X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
        char *p;
        long n = BIO_get_mem_data(b, &p);
        if (n > 0) {
            size_t k = (size_t)n < len - 1 ? (size_t)n : len - 1;
            memcpy(out, p, k);
            out[k] = '\0';
        } else if (n == 0) {
            snprintf(out, len, "empty subject");
        }
    }
    BIO_free(b);
}

/* Records the first certificate that fails verification (any side), for the message. */
static int verify_cb(int ok, X509_STORE_CTX *xs)
{
    if (ok)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct sq_tls_conn *t = ssl ? SSL_get_ex_data(ssl, ex_index_once()) : NULL;
    if (t && t->vdepth < 0) {
        t->vdepth = X509_STORE_CTX_get_error_depth(xs);
        subject_of(X509_STORE_CTX_get_current_cert(xs), t->vsubj, sizeof(t->vsubj));
    }
    return ok;
}

/* The ex_data slot that points an SSL at its sq_tls_conn. */
static int ex_index;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;
static void ex_init(void)
{
    ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}
static int ex_index_once(void)
{
    pthread_once(&ex_once, ex_init);
    return ex_index;
}

static void set_common(SSL_CTX *ctx)
{
    /* An end without close_notify reads as the end of the stream, as on a plain socket (a
     * response delimited by the close must complete). No renegotiation, no compression. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_clear_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
}

/* ---- client ---- */

/* A browser's suites in a browser's order (Chrome's): AES-128-GCM first (the server picks from
 * the client's order unless it prefers its own). OpenSSL's default puts AES-256-GCM first, whose
 * SHA-384 key schedule costs a resumed TLS 1.3 handshake ~100k more instructions (of ~2.3M,
 * X25519 included), and offers 27 TLS 1.2 suites (DHE and CBC-SHA-2 ones that browsers dropped),
 * which cost ~35k more to build into each ClientHello. A load generator should look like the
 * clients the server meets, and a server that browsers reach accepts this list. */
#define CLIENT_SUITES_13                                                                           \
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define CLIENT_SUITES_12                                                                           \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"     \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"       \
    "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA:"    \
    "AES256-SHA"

static int set_client_suites(SSL_CTX *ctx)
{
    if (SSL_CTX_set_cipher_list(ctx, CLIENT_SUITES_12) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, CLIENT_SUITES_13) != 1) {
        ERR_clear_error();
        return -ENOMEM;
    }
    return 0;
}

/* Adds sess (its reference) to the cache, dropping the oldest when full. */
/* Drops entry i of the cache (not its reference). */
static void sessions_remove(struct sq_tls_sessions *s, unsigned i)
{
    memmove(&s->_v[i], &s->_v[i + 1], (s->_n - i - 1) * sizeof(s->_v[0]));
    memmove(&s->_c[i], &s->_c[i + 1], (s->_n - i - 1) * sizeof(s->_c[0]));
    s->_n--;
}

/* Adds sess (its reference), issued to a connection of ctx, dropping the oldest when full. */
static void sessions_push(struct sq_tls_sessions *s, SSL_SESSION *sess, const SSL_CTX *ctx)
{
    if (s->_n == SQ_TLS_SESSIONS) {
        SSL_SESSION_free(s->_v[0]);
        sessions_remove(s, 0);
    }
    s->_c[s->_n] = ctx;
    s->_v[s->_n++] = sess;
}

/* The newest resumable session issued under ctx, or NULL; *taken says whether it left the cache
 * (a TLS 1.3 ticket: the caller then owns that reference). Spent sessions of ctx found on the way
 * are freed. A session is only offered by the context it came from: one resumed elsewhere would
 * skip that context's certificate and name checks (a worker may reach several hosts). */
static SSL_SESSION *sessions_take(struct sq_tls_sessions *s, const SSL_CTX *ctx, bool *taken)
{
    *taken = false;
    for (unsigned i = s->_n; i-- > 0;) {
        if (s->_c[i] != ctx)
            continue;
        SSL_SESSION *sess = s->_v[i];
        if (!SSL_SESSION_is_resumable(sess)) {
            SSL_SESSION_free(sess);
            sessions_remove(s, i);
            continue;
        }
        if (SSL_SESSION_get_protocol_version(sess) >= TLS1_3_VERSION) {
            sessions_remove(s, i);
            *taken = true;
        }
        return sess;
    }
    return NULL;
}

static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    struct sq_tls_conn *t = SSL_get_ex_data(ssl, ex_index_once());
    if (!t || !t->cache)
        return 0;
    sessions_push(t->cache, sess, SSL_get_SSL_CTX(ssl));
    return 1; /* the cache keeps the reference */
}

/* Keeps the SSL of a finished client connection for the next one: reset by SSL_clear (the
 * handshake state, keys and buffers' contents go; the settings copied from the context and the
 * read buffer stay), with no session and no connection pointer. False: not kept (the caller
 * frees it). */
static bool spare_put(struct sq_tls_sessions *s, SSL *ssl)
{
    if (s->_nspare == SQ_TLS_SPARES)
        return false;
    SSL_set_ex_data(ssl, ex_index_once(), NULL);
    if (SSL_clear(ssl) != 1) {
        ERR_clear_error();
        return false;
    }
    SSL_set_session(ssl, NULL); /* the ticket is the cache's (or spent), not this object's */
    s->_spare[s->_nspare++] = ssl;
    return true;
}

/* A spare SSL of ctx, or NULL. Spares of another context (a worker reaching several hosts) are
 * freed on the way. */
static SSL *spare_take(struct sq_tls_sessions *s, SSL_CTX *ctx)
{
    while (s->_nspare > 0) {
        SSL *ssl = s->_spare[--s->_nspare];
        if (SSL_get_SSL_CTX(ssl) == ctx)
            return ssl;
        SSL_free(ssl);
    }
    return NULL;
}

void sq_tls_sessions_dispose(struct sq_tls_sessions *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->_n; i++)
        SSL_SESSION_free(s->_v[i]);
    s->_n = 0;
    for (unsigned i = 0; i < s->_nspare; i++)
        SSL_free(s->_spare[i]);
    s->_nspare = 0;
}

unsigned sq_tls_sessions_count(const struct sq_tls_sessions *s)
{
    return s->_n;
}

unsigned sq_tls_sessions_spares(const struct sq_tls_sessions *s)
{
    return s->_nspare;
}

int sq_tls_client_new(const struct sq_tls_client_opts *o, struct sq_tls_client **out, char *errbuf,
                      size_t errlen)
{
    msg(errbuf, errlen, "%s", "");
    if (sq_dynlib_load(&ossl_libs, errbuf, errlen) < 0)
        return -ENOENT;
    ex_index_once();
    struct sq_tls_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = parse_protos(o->alpn, &c->alpn, errbuf, errlen);
    if (rc < 0)
        goto fail;
    c->alpn_required = !c->alpn.has_h1;
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (!c->ctx) {
        ERR_clear_error();
        rc = -ENOMEM;
        goto fail;
    }
    set_common(c->ctx);
    if ((rc = set_versions(c->ctx, o->min_version, o->max_version, errbuf, errlen)) < 0)
        goto fail;
    if ((rc = set_client_suites(c->ctx)) < 0)
        goto fail;
    rc = -EINVAL;
    char tmp[128];
    if (o->insecure) {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, verify_cb);
        if (o->cacert) {
            if (check_file("cacert", o->cacert, errbuf, errlen) < 0)
                goto fail;
            if (SSL_CTX_load_verify_locations(c->ctx, o->cacert, NULL) != 1) {
                msg(errbuf, errlen, "cacert '%s': %s", o->cacert,
                    take_reason(NULL, tmp, sizeof(tmp)));
                goto fail;
            }
        } else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
            ERR_clear_error(); /* no system store: every verify fails, with its own message */
        }
    }
    if (o->host && o->host[0]) {
        snprintf(c->host, sizeof(c->host), "%s", o->host);
        unsigned char ip[16];
        bool is_ip = inet_pton(AF_INET, o->host, ip) == 1 || inet_pton(AF_INET6, o->host, ip) == 1;
        c->sni = !is_ip;
        if (!o->insecure) {
            X509_VERIFY_PARAM *vp = SSL_CTX_get0_param(c->ctx);
            X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, o->host)
                           : X509_VERIFY_PARAM_set1_host(vp, o->host, 0);
            if (ok != 1) {
                msg(errbuf, errlen, "host '%s': cannot be checked against a certificate", o->host);
                ERR_clear_error();
                goto fail;
            }
        }
    }
    if (o->key && !o->cert) {
        msg(errbuf, errlen, "key '%s' given without cert", o->key);
        goto fail;
    }
    if (o->cert) {
        const char *key = o->key ? o->key : o->cert;
        if (check_file("cert", o->cert, errbuf, errlen) < 0 ||
            check_file("key", key, errbuf, errlen) < 0)
            goto fail;
        if (SSL_CTX_use_certificate_chain_file(c->ctx, o->cert) != 1) {
            msg(errbuf, errlen, "cert '%s': %s", o->cert, take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(c->ctx, key, SSL_FILETYPE_PEM) != 1) {
            msg(errbuf, errlen, "key '%s': %s", key, take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
        if (SSL_CTX_check_private_key(c->ctx) != 1) {
            msg(errbuf, errlen, "key '%s' does not match cert '%s': %s", key, o->cert,
                take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
    }
    if (SSL_CTX_set_alpn_protos(c->ctx, c->alpn.wire, c->alpn.wire_len) != 0) {
        ERR_clear_error();
        rc = -ENOMEM;
        goto fail;
    }
    SSL_CTX_set_session_cache_mode(c->ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c->ctx, new_session_cb);
    *out = c;
    return 0;
fail:
    sq_tls_client_free(c);
    return rc;
}

void sq_tls_client_free(struct sq_tls_client *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx);
    free(c);
}

/* ---- server ---- */

static int alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    SQ_UNUSED(ssl);
    struct sq_tls_server *s = arg;
    unsigned char *sel = NULL;
    unsigned char sel_len = 0;
    if (SSL_select_next_proto(&sel, &sel_len, s->alpn.wire, s->alpn.wire_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol (RFC 7301) */
    *out = sel;
    *outlen = sel_len;
    return SSL_TLSEXT_ERR_OK;
}

static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!e)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

/* A self-signed EC P-256 certificate for localhost, valid for a day. */
static int self_signed(X509 **xout, EVP_PKEY **kout)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    BIGNUM *bn = BN_new();
    int rc = -1;
    if (!pk || !x || !bn)
        goto out;
    if (!X509_set_version(x, X509_VERSION_3) ||
        !BN_rand(bn, 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
        !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
        goto out;
    if (!X509_gmtime_adj(X509_getm_notBefore(x), -300) || /* a little clock skew */
        !X509_gmtime_adj(X509_getm_notAfter(x), 86400))
        goto out;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost",
                                    -1, -1, 0) ||
        !X509_set_issuer_name(x, name) || !X509_set_pubkey(x, pk))
        goto out;
    if (add_ext(x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
        add_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign") < 0 ||
        add_ext(x, NID_ext_key_usage, "serverAuth") < 0 ||
        add_ext(x, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(x, NID_authority_key_identifier, "keyid:always") < 0 ||
        add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") < 0)
        goto out;
    if (!X509_sign(x, pk, EVP_sha256()))
        goto out;
    *xout = x;
    *kout = pk;
    x = NULL;
    pk = NULL;
    rc = 0;
out:
    BN_free(bn);
    X509_free(x);
    EVP_PKEY_free(pk);
    return rc;
}

int sq_tls_server_new(const struct sq_tls_server_opts *o, struct sq_tls_server **out, char *errbuf,
                      size_t errlen)
{
    msg(errbuf, errlen, "%s", "");
    if (sq_dynlib_load(&ossl_libs, errbuf, errlen) < 0)
        return -ENOENT;
    ex_index_once();
    struct sq_tls_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    char tmp[128];
    int rc = parse_protos(o->alpn, &s->alpn, errbuf, errlen);
    if (rc < 0)
        goto fail;
    s->ctx = SSL_CTX_new(TLS_server_method());
    if (!s->ctx) {
        ERR_clear_error();
        rc = -ENOMEM;
        goto fail;
    }
    set_common(s->ctx);
    if ((rc = set_versions(s->ctx, o->min_version, o->max_version, errbuf, errlen)) < 0)
        goto fail;
    rc = -EINVAL;
    /* Sessions: the default server cache (TLS 1.2) and stateless tickets; one ticket per
     * handshake is enough for a client that reconnects one connection at a time. The id
     * context is required for resumption once client certificates are verified. */
    SSL_CTX_set_session_id_context(s->ctx, (const unsigned char *)"squall", 6);
    SSL_CTX_set_num_tickets(s->ctx, 1);
    if ((o->cert == NULL) != (o->key == NULL)) {
        msg(errbuf, errlen, "cert and key go together (or neither, for a generated certificate)");
        goto fail;
    }
    if (o->cert) {
        if (check_file("cert", o->cert, errbuf, errlen) < 0 ||
            check_file("key", o->key, errbuf, errlen) < 0)
            goto fail;
        if (SSL_CTX_use_certificate_chain_file(s->ctx, o->cert) != 1) {
            msg(errbuf, errlen, "cert '%s': %s", o->cert, take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(s->ctx, o->key, SSL_FILETYPE_PEM) != 1) {
            msg(errbuf, errlen, "key '%s': %s", o->key, take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
        if (SSL_CTX_check_private_key(s->ctx) != 1) {
            msg(errbuf, errlen, "key '%s' does not match cert '%s': %s", o->key, o->cert,
                take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
    } else {
        X509 *x = NULL;
        EVP_PKEY *pk = NULL;
        if (self_signed(&x, &pk) < 0) {
            msg(errbuf, errlen, "cannot generate a certificate: %s",
                take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
        int ok = SSL_CTX_use_certificate(s->ctx, x) == 1 && SSL_CTX_use_PrivateKey(s->ctx, pk) == 1;
        X509_free(x); /* the context holds its own references */
        EVP_PKEY_free(pk);
        if (!ok) {
            msg(errbuf, errlen, "cannot use the generated certificate: %s",
                take_reason(NULL, tmp, sizeof(tmp)));
            goto fail;
        }
    }
    if (o->client_ca) {
        if (check_file("client_ca", o->client_ca, errbuf, errlen) < 0)
            goto fail;
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->client_ca);
        if (!names || SSL_CTX_load_verify_locations(s->ctx, o->client_ca, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            msg(errbuf, errlen, "client_ca '%s': %s", o->client_ca,
                ERR_peek_error() ? take_reason(NULL, tmp, sizeof(tmp)) : "no certificate in it");
            goto fail;
        }
        SSL_CTX_set_client_CA_list(s->ctx, names);
        SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
    }
    SSL_CTX_set_alpn_select_cb(s->ctx, alpn_select_cb, s);
    if (o->cert_out) {
        FILE *f = fopen(o->cert_out, "w");
        X509 *x = SSL_CTX_get0_certificate(s->ctx);
        bool ok = f && x && PEM_write_X509(f, x) == 1;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            msg(errbuf, errlen, "cert_out '%s': cannot write: %s", o->cert_out, strerror(errno));
            ERR_clear_error();
            goto fail;
        }
    }
    *out = s;
    return 0;
fail:
    sq_tls_server_free(s);
    return rc;
}

static char *bio_text(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *out = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (out) {
        memcpy(out, p, (size_t)n);
        out[n] = 0;
    }
    return out;
}

int sq_tls_server_pem(const struct sq_tls_server *s, char **cert, char **key)
{
    *cert = *key = NULL;
    X509 *x = SSL_CTX_get0_certificate(s->ctx);
    EVP_PKEY *k = SSL_CTX_get0_privatekey(s->ctx);
    BIO *bc = BIO_new(BIO_s_mem()), *bk = BIO_new(BIO_s_mem());
    int rc = -ENOMEM;
    if (x && k && bc && bk && PEM_write_bio_X509(bc, x) == 1 &&
        PEM_write_bio_PrivateKey(bk, k, NULL, NULL, 0, NULL, NULL) == 1) {
        *cert = bio_text(bc);
        *key = bio_text(bk);
        if (*cert && *key) {
            rc = 0;
        } else {
            free(*cert);
            sq_tls_pem_free(*key);
            *cert = *key = NULL;
        }
    }
    BIO_free(bc);
    if (bk) {
        char *p = NULL;
        long n = BIO_get_mem_data(bk, &p);
        if (n > 0)
            OPENSSL_cleanse(p, (size_t)n);
        BIO_free(bk);
    }
    return rc;
}

void sq_tls_pem_free(char *pem)
{
    if (pem) {
        OPENSSL_cleanse(pem, strlen(pem));
        free(pem);
    }
}

void sq_tls_server_free(struct sq_tls_server *s)
{
    if (!s)
        return;
    SSL_CTX_free(s->ctx);
    free(s);
}

/* ---- connections ---- */

/* OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a connection the peer has
 * closed. This one is the socket BIO with its write replaced by send(MSG_NOSIGNAL), so no caller
 * has to ignore SIGPIPE (the plaintext paths never needed to). */
static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *in, int inl)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    ssize_t r = send(fd, in, (size_t)inl, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (r < 0 && BIO_sock_should_retry(-1))
        BIO_set_retry_write(b);
    return r < 0 ? -1 : (int)r;
}

static void bio_init(void)
{
    const BIO_METHOD *s = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "socket, MSG_NOSIGNAL");
    if (!m)
        return;
    if (!BIO_meth_set_write(m, nosig_write) || !BIO_meth_set_read(m, BIO_meth_get_read(s)) ||
        !BIO_meth_set_puts(m, BIO_meth_get_puts(s)) ||
        !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s)) ||
        !BIO_meth_set_create(m, BIO_meth_get_create(s)) ||
        !BIO_meth_set_destroy(m, BIO_meth_get_destroy(s))) {
        BIO_meth_free(m);
        return;
    }
    bio_method = m; /* lives as long as the process */
}

/* Attaches fd (not owned) to ssl through the no-SIGPIPE socket BIO. */
static int set_socket(SSL *ssl, int fd)
{
    pthread_once(&bio_once, bio_init);
    if (!bio_method)
        return 0;
    BIO *b = BIO_new(bio_method);
    if (!b)
        return 0;
    BIO_set_fd(b, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, b, b);
    return 1;
}

/* A connection on fd with ssl (a spare, owned from here on) or a new SSL of ctx. */
static int conn_new(SSL_CTX *ctx, SSL *ssl, int fd, struct sq_tls_conn **out)
{
    struct sq_tls_conn *t = calloc(1, sizeof(*t));
    if (!t) {
        SSL_free(ssl);
        return -ENOMEM;
    }
    t->vdepth = -1;
    t->ssl = ssl ? ssl : SSL_new(ctx);
    if (!t->ssl || set_socket(t->ssl, fd) != 1 ||
        SSL_set_ex_data(t->ssl, ex_index_once(), t) != 1) {
        ERR_clear_error();
        sq_tls_conn_free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

int sq_tls_conn_client(struct sq_tls_client *c, struct sq_tls_sessions *cache, int fd,
                       struct sq_tls_conn **out)
{
    struct sq_tls_conn *t;
    int rc = conn_new(c->ctx, cache ? spare_take(cache, c->ctx) : NULL, fd, &t);
    if (rc < 0)
        return rc;
    t->client = c;
    t->alpn = &c->alpn;
    t->cache = cache;
    SSL_set_connect_state(t->ssl);
    SSL_set_read_ahead(t->ssl, 1); /* one read() per burst of records (sq_tls_buffered) */
    if (c->sni && SSL_set_tlsext_host_name(t->ssl, c->host) != 1) {
        ERR_clear_error();
        sq_tls_conn_free(t);
        return -ENOMEM;
    }
    bool taken;
    SSL_SESSION *sess = cache ? sessions_take(cache, c->ctx, &taken) : NULL;
    if (sess) {
        SSL_set_session(t->ssl, sess); /* holds its own reference; a failure costs the resumption */
        if (taken)
            SSL_SESSION_free(sess);
    }
    ERR_clear_error();
    *out = t;
    return 0;
}

int sq_tls_conn_server(struct sq_tls_server *s, int fd, struct sq_tls_conn **out)
{
    struct sq_tls_conn *t;
    int rc = conn_new(s->ctx, NULL, fd, &t);
    if (rc < 0)
        return rc;
    t->alpn = &s->alpn;
    SSL_set_accept_state(t->ssl);
    *out = t;
    return 0;
}

void sq_tls_conn_free(struct sq_tls_conn *t)
{
    if (!t)
        return;
    /* Freed without a shutdown, an SSL marks its session unusable, and the session may be the
     * one this thread's cache offers next (TLS 1.3 sessions always are). Closing a socket does
     * not spoil a session: a fatal TLS error has already marked it where it applies. */
    if (t->ssl)
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    /* A client connection that completed its handshake and met no TLS error leaves its object
     * for the thread's next connection (SSL_clear, as h2load does); anything else is freed. */
    if (t->client && t->cache && t->ssl && !t->failed && SSL_is_init_finished(t->ssl) &&
        spare_put(t->cache, t->ssl))
        t->ssl = NULL;
    SSL_free(t->ssl);
    free(t);
}

/* Why a verification failed: the verify result, and the certificate it failed on. */
static void verify_message(struct sq_tls_conn *t)
{
    long v = SSL_get_verify_result(t->ssl);
    const char *why = v == X509_V_OK ? "no certificate" : X509_verify_cert_error_string(v);
    if (t->vdepth < 0) {
        msg(t->err, sizeof(t->err), "certificate verify failed: %s", why);
        return;
    }
    const char *expected = "";
    if (t->client && (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH))
        expected = t->client->host;
    msg(t->err, sizeof(t->err), "certificate verify failed: %s (depth %d, %s%s%s)", why, t->vdepth,
        t->vsubj, expected[0] ? "; expected " : "", expected);
}

/* Fills t->err for an SSL_ERROR_SSL failure during `what` and empties the error queue. */
static void describe(struct sq_tls_conn *t, const char *what)
{
    char tmp[128];
    unsigned long code;
    const char *r = take_reason(&code, tmp, sizeof(tmp));
    int reason = ERR_SYSTEM_ERROR(code) ? 0 : ERR_GET_REASON(code);
    switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        verify_message(t);
        return;
    case SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL:
        msg(t->err, sizeof(t->err), "ALPN mismatch: the server accepts none of %s (%s)",
            t->alpn->list, r);
        return;
    case SSL_R_NO_APPLICATION_PROTOCOL:
        msg(t->err, sizeof(t->err), "ALPN mismatch: the client offered none of %s", t->alpn->list);
        return;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_HTTP_REQUEST:
        msg(t->err, sizeof(t->err), "%s: %s (is the peer speaking TLS?)", what, r);
        return;
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        msg(t->err, sizeof(t->err), "%s: %s (the server requires a client certificate)", what, r);
        return;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        msg(t->err, sizeof(t->err), "%s: %s (a client certificate is required)", what, r);
        return;
    default:
        if (t->vdepth >= 0 && SSL_get_verify_result(t->ssl) != X509_V_OK) {
            verify_message(t);
            return;
        }
        msg(t->err, sizeof(t->err), "%s: %s", what, r);
    }
}

/* Maps a failed SSL call (r <= 0) onto -EAGAIN, 0 (clean end) or an error with a message. */
static int failure(struct sq_tls_conn *t, int r, const char *what)
{
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        t->want_write = false;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        t->want_write = true;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL: {
        int err = errno;
        ERR_clear_error();
        t->failed = true;
        if (err == 0 || err == EAGAIN)
            err = ECONNRESET; /* no errno: the peer went away mid-record */
        msg(t->err, sizeof(t->err), "%s: %s", what, strerror(err));
        return -err;
    }
    default:
        t->failed = true;
        describe(t, what);
        return -EPROTO;
    }
}

int sq_tls_handshake(struct sq_tls_conn *t)
{
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        if (t->client && t->client->alpn_required) {
            const unsigned char *sel = NULL;
            unsigned len = 0;
            SSL_get0_alpn_selected(t->ssl, &sel, &len);
            if (len == 0) {
                t->failed = true;
                msg(t->err, sizeof(t->err), "ALPN mismatch: the server selected none of %s",
                    t->alpn->list);
                return -EPROTO;
            }
        }
        return 0;
    }
    int rc = failure(t, r, "handshake failure");
    if (rc == 0) {
        t->failed = true;
        msg(t->err, sizeof(t->err), "handshake failure: the peer closed the connection");
        return -ECONNRESET;
    }
    return rc;
}

bool sq_tls_want_write(const struct sq_tls_conn *t)
{
    return t->want_write;
}

ssize_t sq_tls_read(struct sq_tls_conn *t, void *buf, size_t n)
{
    int r = SSL_read(t->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0)
        return r;
    return failure(t, r, "read failed");
}

ssize_t sq_tls_write(struct sq_tls_conn *t, const void *buf, size_t n)
{
    if (n == 0)
        return 0;
    int r = SSL_write(t->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0)
        return r;
    int rc = failure(t, r, "write failed");
    return rc == 0 ? -EPIPE : rc;
}

size_t sq_tls_pending(const struct sq_tls_conn *t)
{
    int n = SSL_pending(t->ssl);
    return n > 0 ? (size_t)n : 0;
}

bool sq_tls_buffered(const struct sq_tls_conn *t)
{
    return SSL_has_pending(t->ssl) == 1;
}

void sq_tls_shutdown(struct sq_tls_conn *t)
{
    if (t->failed || t->shut || !SSL_is_init_finished(t->ssl))
        return;
    SSL_shutdown(t->ssl); /* one try: the close_notify goes out unless the socket is full */
    ERR_clear_error();
    t->shut = true; /* once */
}

const char *sq_tls_conn_error(const struct sq_tls_conn *t)
{
    return t->err;
}

bool sq_tls_resumed(const struct sq_tls_conn *t)
{
    return SSL_session_reused(t->ssl) == 1;
}

const char *sq_tls_version(const struct sq_tls_conn *t)
{
    return SSL_get_version(t->ssl);
}

const char *sq_tls_cipher(const struct sq_tls_conn *t)
{
    const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);
    return c ? SSL_CIPHER_get_name(c) : "";
}

const char *sq_tls_alpn(const struct sq_tls_conn *t)
{
    const unsigned char *sel = NULL;
    unsigned len = 0;
    SSL_get0_alpn_selected(t->ssl, &sel, &len);
    return len ? proto_name(t->alpn, sel, len) : "";
}
