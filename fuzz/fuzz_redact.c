/* fuzz_redact.c - base/redact over hostile text: an HTTP head or not, cut or not, with up to
 * three secrets. The first byte picks the flags and how many secrets; the next three their
 * lengths; their bytes come next, mapped to capital letters and digits (bytes "[redacted]" does
 * not hold, so a secret in the output can only be one the redaction missed); the rest is the
 * text, copied to an exact-size buffer so an over-read faults. Checks: no secret of
 * SQ_REDACT_MIN bytes or more survives; the output is at most the text plus "[redacted]" per
 * input byte; the text read as a URL loses exactly its userinfo secret (sq_redact_url). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    if (size < 4)
        return 0;
    unsigned flags = data[0] & 3;
    size_t ns = (data[0] >> 2) % 4;
    char sbuf[3][32];
    struct sq_str secrets[3];
    size_t at = 4;
    for (size_t i = 0; i < ns; i++) {
        size_t l = data[1 + i] % 24;
        if (at + l > size)
            l = size - at;
        for (size_t k = 0; k < l; k++)
            sbuf[i][k] = alpha[data[at + k] % (sizeof(alpha) - 1)];
        secrets[i] = (struct sq_str){sbuf[i], l};
        at += l;
    }
    size_t n = size - at;
    char *text = malloc(n ? n : 1);
    if (!text)
        return 0;
    memcpy(text, data + at, n);
    size_t len = 0;
    char *out = sq_redact_dup(text, n, flags, secrets, ns, &len);
    if (!out)
        abort();
    if (len > n + n * (sizeof(SQ_REDACTED) - 1) + sizeof(SQ_REDACTED))
        abort();
    for (size_t i = 0; i < ns; i++)
        if (secrets[i].len >= SQ_REDACT_MIN && memmem(out, len, secrets[i].p, secrets[i].len))
            abort();
    free(out);
    /* the text as a URL: its userinfo secret out, the rest as it was */
    struct sq_buf u = {0};
    size_t uat, sl;
    if (sq_redact_url(text, n, &u) < 0)
        abort();
    if (sq_redact_url_secret(text, n, &uat, &sl) && sl) {
        if (uat + sl > n || u.len != n - sl + sizeof(SQ_REDACTED) - 1 ||
            memcmp(u.p, text, uat) != 0 ||
            memcmp(u.p + uat + sizeof(SQ_REDACTED) - 1, text + uat + sl, n - uat - sl) != 0)
            abort();
    } else if (u.len != n || (n && memcmp(u.p, text, n) != 0)) {
        abort();
    }
    sq_buf_dispose(&u);
    free(text);
    return 0;
}
