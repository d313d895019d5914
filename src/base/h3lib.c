/* base/h3lib.c - see h3lib.h. */
#define SQ_H3LIB_IMPL
#include "base/h3lib.h"

#ifdef SQ_HAVE_H3

#include "base/dynlib.h"

struct sq_h3lib sq_h3lib;

/* In dependency order (the crypto backend needs GnuTLS and ngtcp2). The SONAMEs are
 * CMakeLists.txt's, read from the libraries pkg-config found. */
enum { LIB_GNUTLS, LIB_NGTCP2, LIB_NGTCP2_CRYPTO, LIB_NGHTTP3, NLIBS };
static const char *const sonames[NLIBS] = {SQ_H3_SONAME_GNUTLS, SQ_H3_SONAME_NGTCP2,
                                           SQ_H3_SONAME_NGTCP2_CRYPTO, SQ_H3_SONAME_NGHTTP3};

static const struct sq_dynlib_sym syms[] = {
#define SQ_H3LIB_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_h3lib, sym)},
    SQ_H3LIB_SYMS(SQ_H3LIB_ENTRY)
#undef SQ_H3LIB_ENTRY
};

static struct sq_dynlib libs = {
    .what = "HTTP/3",
    .hint = "scripts/deps.sh installs the QUIC libraries",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_h3lib,
    .table_size = sizeof(sq_h3lib),
};

int sq_h3lib_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}

void sq_h3lib_crypto_callbacks(ngtcp2_callbacks *cb)
{
    cb->recv_crypto_data = sq_h3lib.ngtcp2_crypto_recv_crypto_data_cb;
    cb->encrypt = sq_h3lib.ngtcp2_crypto_encrypt_cb;
    cb->decrypt = sq_h3lib.ngtcp2_crypto_decrypt_cb;
    cb->hp_mask = sq_h3lib.ngtcp2_crypto_hp_mask_cb;
    cb->update_key = sq_h3lib.ngtcp2_crypto_update_key_cb;
    cb->delete_crypto_aead_ctx = sq_h3lib.ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb->delete_crypto_cipher_ctx = sq_h3lib.ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
}

#endif
