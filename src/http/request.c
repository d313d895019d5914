/* http/request.c - request serialisation and -H flag parsing. Runs once per run (not on the hot
 * path), so it measures twice and writes once: the exact size first, then one allocation. */
#include "http/request.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SQ_VERSION
#define SQ_VERSION "0"
#endif

#define UA_LINE "User-Agent: squall/" SQ_VERSION "\r\n"

static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_token_n(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    return true;
}

/* Non-empty visible ASCII: what may sit on the request line or in Host. */
static bool is_visible(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

/* field-value bytes: HTAB, SP, VCHAR, obs-text. */
static bool is_value_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* ASCII case-insensitive equality with a lowercase literal (no locale involved). */
static bool name_is(const char *name, const char *lit)
{
    for (; *name && *lit; name++, lit++) {
        char c = *name;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != *lit)
            return false;
    }
    return *name == *lit;
}

enum { K_OTHER, K_HOST, K_CL, K_UA, K_TE };

static int kind_of(const char *name)
{
    if (name_is(name, "host"))
        return K_HOST;
    if (name_is(name, "content-length"))
        return K_CL;
    if (name_is(name, "user-agent"))
        return K_UA;
    if (name_is(name, "transfer-encoding"))
        return K_TE;
    return K_OTHER;
}

static size_t header_len(const struct sq_kv *h)
{
    size_t v = strlen(h->value);
    return strlen(h->name) + 1 + (v ? 1 + v : 0) + 2;
}

static char *put(char *w, const char *s, size_t n)
{
    memcpy(w, s, n);
    return w + n;
}

static char *put_header(char *w, const struct sq_kv *h)
{
    size_t v = strlen(h->value);
    w = put(w, h->name, strlen(h->name));
    *w++ = ':';
    if (v) {
        *w++ = ' ';
        w = put(w, h->value, v);
    }
    return put(w, "\r\n", 2);
}

int sq_request_build(const char *method, const char *path, const char *authority,
                     const struct sq_kv *headers, size_t nheaders, const void *body,
                     size_t body_len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!method || !is_token_n(method, strlen(method)) || !is_visible(path) ||
        !is_visible(authority) || (!body && body_len) || (nheaders && !headers))
        return -SQ_EUSAGE;

    bool user[5] = {false};
    for (size_t i = 0; i < nheaders; i++) {
        const struct sq_kv *h = &headers[i];
        if (!h->name || !h->value || !is_token_n(h->name, strlen(h->name)) ||
            !is_value_n(h->value, strlen(h->value)))
            return -SQ_EUSAGE;
        user[kind_of(h->name)] = true;
    }
    bool body_method =
        !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH");
    bool want_cl = !user[K_CL] && !user[K_TE] && (body_len > 0 || body_method);
    char cl[48] = "";
    if (want_cl)
        snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", body_len);

    /* Measure. A user header with an empty value that replaces a default is not sent. */
    size_t n = strlen(method) + 1 + strlen(path) + sizeof(" HTTP/1.1\r\n") - 1;
    if (!user[K_HOST])
        n += sizeof("Host: \r\n") - 1 + strlen(authority);
    for (size_t i = 0; i < nheaders; i++) {
        int k = kind_of(headers[i].name);
        if (k == K_OTHER || k == K_TE || headers[i].value[0])
            n += header_len(&headers[i]);
    }
    n += strlen(cl);
    if (!user[K_UA])
        n += sizeof(UA_LINE) - 1;
    n += 2;
    if (body_len > SIZE_MAX - n - 1)
        return -ENOMEM;
    n += body_len;

    char *buf = malloc(n + 1);
    if (!buf)
        return -ENOMEM;
    char *w = buf;
    w = put(w, method, strlen(method));
    *w++ = ' ';
    w = put(w, path, strlen(path));
    w = put(w, " HTTP/1.1\r\n", sizeof(" HTTP/1.1\r\n") - 1);
    if (!user[K_HOST]) {
        w = put(w, "Host: ", 6);
        w = put(w, authority, strlen(authority));
        w = put(w, "\r\n", 2);
    } else {
        for (size_t i = 0; i < nheaders; i++)
            if (kind_of(headers[i].name) == K_HOST && headers[i].value[0])
                w = put_header(w, &headers[i]);
    }
    for (size_t i = 0; i < nheaders; i++) {
        int k = kind_of(headers[i].name);
        if (k == K_HOST || (k != K_OTHER && k != K_TE && !headers[i].value[0]))
            continue;
        w = put_header(w, &headers[i]);
    }
    w = put(w, cl, strlen(cl));
    if (!user[K_UA])
        w = put(w, UA_LINE, sizeof(UA_LINE) - 1);
    w = put(w, "\r\n", 2);
    if (body_len)
        w = put(w, body, body_len);
    *w = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}

int sq_header_parse_arg(const char *arg, struct sq_kv *out)
{
    out->name = out->value = NULL;
    if (!arg)
        return -SQ_EUSAGE;
    const char *colon = strchr(arg, ':');
    if (!colon || !is_token_n(arg, (size_t)(colon - arg)))
        return -SQ_EUSAGE;
    size_t nn = (size_t)(colon - arg);
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t vn = strlen(v);
    while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
    if (!is_value_n(v, vn))
        return -SQ_EUSAGE;
    char *block = malloc(nn + 1 + vn + 1);
    if (!block)
        return -ENOMEM;
    memcpy(block, arg, nn);
    block[nn] = '\0';
    memcpy(block + nn + 1, v, vn);
    block[nn + 1 + vn] = '\0';
    out->name = block;
    out->value = block + nn + 1;
    return 0;
}

void sq_header_arg_dispose(struct sq_kv *kv)
{
    free((void *)kv->name);
    kv->name = kv->value = NULL;
}
