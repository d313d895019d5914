/* base/sha1.h - SHA-1 (FIPS 180-4) of one buffer, for the WebSocket handshake (RFC 6455 section
 * 4: Sec-WebSocket-Accept is the base64 of the SHA-1 of the key and a fixed GUID). Not for
 * anything that needs a secure hash: SHA-1 is broken for that. Here so a run without TLS need
 * not open libcrypto for one hash (net/tls.c opens OpenSSL only for TLS). */
#ifndef SQ_BASE_SHA1_H
#define SQ_BASE_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SQ_SHA1_LEN 20

/* Writes the 20-byte SHA-1 digest of in[0..n) to out. */
void sq_sha1(const void *in, size_t n, uint8_t out[SQ_SHA1_LEN]);

#endif
