/* base/text.h - the text helpers every parser needs once: hex digits, UTF-8 decode/encode and
 * the edit distance behind "did you mean ...?" suggestions.
 *
 * One copy each, here, instead of one per module: the HTTP chunk-size parser (http/h1.c), the
 * JSON walker (base/json.c, which every JSON reader shares), the JSON paths (plan/jpath.c), the
 * plan loader (plan/load.c, plan/yaml.c), the templates (plan/tmpl.c), the daemon's query
 * strings (daemon/api.c) and the target's echo (target/target.c) all use them.
 */
#ifndef SQ_BASE_TEXT_H
#define SQ_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The index of the first space or control byte (<= 0x20, or 0x7f) in s[0, n), or n when none:
 * what no URL holds (http/url.c and the plan loader's target and url keys name it). */
static inline size_t sq_blank_at(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
            return i;
    return n;
}

/* "0123456789abcdef" and "0123456789ABCDEF", for writing a nibble as a hex digit. */
extern const char sq_hex_lower[17];
extern const char sq_hex_upper[17];

/* The value of hex digit c (0-9, a-f, A-F), or -1. Inline: the chunk-size parser calls it per
 * byte. */
static inline int sq_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The length (1 to 4) of the well-formed UTF-8 sequence at s[0, n) (n >= 1), its code point in
 * *cp when cp is not NULL; 0 when the bytes there are not one: a stray continuation byte, an
 * overlong form, a surrogate, a code point past U+10FFFF, or a sequence cut short by n. */
size_t sq_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes cp (at most U+10FFFF, not a surrogate) as UTF-8 into out (room for 4 bytes) and
 * returns the byte count (1 to 4). */
size_t sq_utf8_encode(uint32_t cp, unsigned char *out);

/* True when s[0, n) is well-formed UTF-8 (the empty string is). */
bool sq_utf8_valid(const char *s, size_t n);

/* Levenshtein distance between a[0, la) and b[0, lb), ignoring ASCII case. Names only: when
 * either is longer than 63 bytes the answer is 64 ("far"), computed in constant space. */
size_t sq_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/* The closest of a set of candidates to a misspelt word, for "(did you mean 'x'?)". A candidate
 * qualifies when its distance is at most 1 + (the longer length) / 4; the first closest wins.
 * Candidates are borrowed: they must outlive the suggestion. */
struct sq_suggest {
    const char *best; /* NULL: nothing close */
    size_t bestd;
    const char *word;
    size_t wlen;
};

void sq_suggest_init(struct sq_suggest *s, const char *word, size_t wlen);
/* Offers cand[0, len); returns true when it became the best so far. */
bool sq_suggest_offer(struct sq_suggest *s, const char *cand, size_t len);
/* Offers a NUL-terminated candidate. */
void sq_suggest_try(struct sq_suggest *s, const char *cand);
/* " (did you mean 'x'?)" into buf, or "" when nothing was close. Returns the text. */
const char *sq_suggest_tail(const struct sq_suggest *s, char *buf, size_t len);

#endif
