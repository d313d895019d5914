/* fuzz_urllist.c - the --urls list parser (face/urllist.h) on any bytes. Checks: a refusal
 * says "NAME:LINE:COL: why" on one line and leaves the list empty-or-valid; an accepted list has
 * 1..SQ_URLLIST_MAX entries on the first one's scheme (https: its host and port too; http may
 * name several hosts), each a URL that parses again to the same port and path, a method (when
 * given) that the request builder takes, and at most one of a literal body and an @PATH, and at
 * most SQ_URLLIST_MAX_HEADERS header lines (vegeta's format), each with which the request builder
 * still takes the request. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "face/urllist.h"
#include "http/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    struct sq_urllist l;
    int rc = sq_urllist_parse("f.txt", (const char *)data, size, &l, err, sizeof(err));
    if (rc < 0) {
        if (rc != -SQ_EPARSE && rc != -ENOMEM)
            abort();
        if (rc == -SQ_EPARSE && (strncmp(err, "f.txt:", 6) != 0 || strchr(err, '\n')))
            abort();
        sq_urllist_dispose(&l);
        return 0;
    }
    if (l.n == 0 || l.n > SQ_URLLIST_MAX)
        abort();
    for (size_t i = 0; i < l.n; i++) {
        const struct sq_urllist_entry *e = &l.v[i];
        bool same = strcmp(e->u.host, l.v[0].u.host) == 0 && e->u.port == l.v[0].u.port;
        if (strcmp(e->u.scheme, l.v[0].u.scheme) || (!same && strcmp(e->u.scheme, "http")) ||
            (e->body && e->body_file) || e->line == 0 || (i && e->line <= l.v[i - 1].line))
            abort();
        struct sq_url again;
        const char *why = NULL;
        if (sq_url_parse(e->url, &again, &why) != 0 || strcmp(again.path, e->u.path) ||
            again.port != e->u.port)
            abort();
        sq_url_dispose(&again);
        if (e->nheaders > SQ_URLLIST_MAX_HEADERS || (e->nheaders && !e->headers))
            abort();
        char *req = NULL;
        size_t len = 0;
        if (sq_request_build(e->method ? e->method : "GET", e->u.path, e->u.authority, e->headers,
                             e->nheaders, e->body, e->body_len, &req, &len) != 0)
            abort();
        free(req);
    }
    sq_urllist_dispose(&l);
    return 0;
}
