/* fuzz_srcaddr.c - the --source-addrs list parser (net/srcaddr.h). Checks: a refusal says why;
 * an accepted list holds 1 to SQ_SRCADDR_MAX addresses, each IPv4 or IPv6 with its length, and
 * those addresses, formatted and joined by commas, parse back to the same addresses. The input
 * is an exact-size heap copy (NUL included), so ASan sees any read past it. */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/srcaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *in = malloc(size + 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    struct sq_addr *v = NULL;
    size_t n = 0;
    char why[240] = "";
    int rc = sq_srcaddr_parse(in, &v, &n, why, sizeof(why));
    free(in);
    if (rc < 0) {
        if (!why[0] && rc != -ENOMEM)
            abort();
        return 0;
    }
    if (n == 0 || n > SQ_SRCADDR_MAX)
        abort();
    char *text = malloc(n * 48 + 1);
    if (!text)
        abort();
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        int fam = v[i].ss.ss_family;
        if ((fam == AF_INET && v[i].len != sizeof(struct sockaddr_in)) ||
            (fam == AF_INET6 && v[i].len != sizeof(struct sockaddr_in6)) ||
            (fam != AF_INET && fam != AF_INET6))
            abort();
        char one[48];
        sq_srcaddr_format(&v[i], one, sizeof(one));
        off += (size_t)snprintf(text + off, n * 48 + 1 - off, "%s%s", i ? "," : "", one);
    }
    struct sq_addr *w = NULL;
    size_t m = 0;
    if (sq_srcaddr_parse(text, &w, &m, why, sizeof(why)) < 0 || m != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (w[i].len != v[i].len || memcmp(&w[i].ss, &v[i].ss, v[i].len) != 0)
            abort();
    free(text);
    free(v);
    free(w);
    return 0;
}
