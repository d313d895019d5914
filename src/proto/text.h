/* proto/text.h - text checks shared inside proto/ (module-internal: sq_proto__ names). */
#ifndef SQ_PROTO_TEXT_H
#define SQ_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* True when p[0, n) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF) and, unless allow_nul, holds no U+0000 (MQTT 5.0 section 1.5.4). */
bool sq_proto__utf8_ok(const char *p, size_t n, bool allow_nul);

#endif
