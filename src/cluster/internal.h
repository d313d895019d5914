/* cluster/internal.h - what agent.c and controller.c share: subjects, ids, publishing JSON and
 * results too large for one message. Internal to cluster/. */
#ifndef SQ_CLUSTER_INTERNAL_H
#define SQ_CLUSTER_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/ctlbus.h"

#define SQ_CLUSTER__SUBJ 200 /* room for a subject: prefix, kind, id */

/* 16 random hex digits and a NUL (getrandom; the clock as a fallback). */
void sq_cluster__rand_id(char out[17]);

/* Publishes o as compact JSON (o is consumed). Returns 0 or a negative code. */
SQ_MUST_CHECK int sq_cluster__pub_json(struct sq_ctlbus *b, const char *subject, const char *reply,
                                       json_t *o);

/* Publishes text, in parts when it is over the server's max_payload: each part is the line
 * "SQPART <run> <agent> <i> <n>\n" and then its bytes. */
SQ_MUST_CHECK int sq_cluster__pub_big(struct sq_ctlbus *b, const char *subject, const char *run,
                                      const char *agent, const char *text, size_t len);

/* A part's header: 1 and its fields when data starts with one (*body, *blen: its bytes), 0 when
 * data is not a part, -1 when it is a malformed one. run and agent have 40 bytes of room. */
int sq_cluster__part(const char *data, size_t len, char *run, char *agent, uint32_t *i, uint32_t *n,
                     const char **body, size_t *blen);

/* The string member key of o, or "" (never NULL). */
const char *sq_cluster__str(const json_t *o, const char *key);

/* An id or name usable as one subject token: [A-Za-z0-9_-]+, at most 64 bytes. */
bool sq_cluster__token_ok(const char *s);

#endif
