/* proto/text.c - UTF-8 well-formedness for MQTT strings and WebSocket close reasons. */
#include "proto/text.h"

#include <stdint.h>
#include <string.h>

bool sq_proto__utf8_ok(const char *s, size_t n, bool allow_nul)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* Eight ASCII bytes at a time: no high bit set and, for MQTT, no zero byte. */
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            bool zero = ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL) != 0;
            if (!(w & 0x8080808080808080ULL) && (allow_nul || !zero)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = p[i];
        if (c < 0x80) {
            if (c == 0 && !allow_nul)
                return false;
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
            min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
            min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}
