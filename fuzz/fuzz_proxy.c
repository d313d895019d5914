/* fuzz_proxy.c - the proxy parsers of face/netopts.h: the --proxy / HTTP(S)_PROXY URL
 * (sq_proxy_parse) and the NO_PROXY list (sq_proxy_from_env). The input is "URL\nNO_PROXY\nHOST".
 * Checks: a refused URL says why; an accepted one has a host of only host-name and address
 * bytes, a port in 1..65535 and credentials free of control bytes, and its host and port written
 * back as "http://host:port" parse to the same; the NO_PROXY matcher reads only its string (an
 * exact-size heap copy each, so ASan sees any read past one) and answers for any host. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "face/netopts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *part(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl ? nl : end;
    size_t n = (size_t)(stop - *p);
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, *p, n);
    s[n] = '\0';
    *p = nl ? nl + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const uint8_t *p = data, *end = data + size;
    char *url = part(&p, end), *np = part(&p, end), *host = part(&p, end);
    char h[256], cred[256], err[300] = "";
    uint16_t port = 0;
    if (sq_proxy_parse(url, h, sizeof(h), &port, cred, sizeof(cred), err, sizeof(err)) < 0) {
        if (!err[0])
            abort();
    } else {
        if (!h[0] || port == 0 || strcspn(h, "\r\n\t @/?#") != strlen(h))
            abort();
        for (const char *c = cred; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                abort();
        char again[300], h2[256], c2[256];
        uint16_t p2 = 0;
        snprintf(again, sizeof(again), "http://%s%s%s:%u", strchr(h, ':') ? "[" : "", h,
                 strchr(h, ':') ? "]" : "", (unsigned)port);
        if (sq_proxy_parse(again, h2, sizeof(h2), &p2, c2, sizeof(c2), err, sizeof(err)) < 0 ||
            strcmp(h, h2) != 0 || p2 != port || c2[0])
            abort();
    }
    setenv("HTTP_PROXY", "http://127.0.0.1:3128", 1);
    setenv("NO_PROXY", np, 1);
    const char *from = NULL;
    const char *got = sq_proxy_from_env("http", host, (uint16_t)(size & 0xffff), &from);
    if (got && strcmp(got, "http://127.0.0.1:3128") != 0)
        abort();
    unsetenv("NO_PROXY");
    free(url);
    free(np);
    free(host);
    return 0;
}
