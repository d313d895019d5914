/* plan/cond.h - a step's `if:` condition (docs/plans.md, Conditions).
 *
 * A condition is comparisons joined by && and || (&& binds tighter, no parentheses):
 *   OPERAND [OP OPERAND]    OP one of == != < <= > >=
 * An operand is `status` (the status of the VU's last response in this iteration, 0 before
 * any), a number, a quoted string ('...' or "...", no escapes), or a name a template could use
 * (a variable, setup.NAME, feeder.column, $vu, $iteration ...), compiled by the caller into a
 * template. A lone operand holds when it is not empty, "0" or "false". Two operands that both
 * read as numbers compare as numbers, else as bytes. Compiled when the plan loads; evaluating
 * allocates nothing beyond the caller's buffers.
 */
#ifndef SQ_PLAN_COND_H
#define SQ_PLAN_COND_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

struct sq_tmpl;
struct sq_cond;

/* Compiles the name [name, name + len) into a template (the loader's resolver); 0, or a
 * negative code with msg (msglen bytes) saying why. */
typedef int (*sq_cond_name_fn)(void *ud, const char *name, size_t len, struct sq_tmpl **out,
                               char *msg, size_t msglen);

/* Parses src. Returns 0, -SQ_EPARSE with err and *erroff (the byte offset in src it is about),
 * or -ENOMEM. */
SQ_MUST_CHECK int sq_cond_parse(const char *src, size_t len, sq_cond_name_fn name, void *ud,
                                struct sq_cond **out, char *err, size_t errlen, size_t *erroff);
void sq_cond_free(struct sq_cond *c);

/* Renders a name operand's template for the VU; 0 or a negative code (the operand is then
 * empty). */
typedef int (*sq_cond_render_fn)(void *ud, const struct sq_tmpl *t, struct sq_buf *out);

/* Whether c holds, with status the last one and names rendered by render into a and b. */
bool sq_cond_eval(const struct sq_cond *c, int status, sq_cond_render_fn render, void *ud,
                  struct sq_buf *a, struct sq_buf *b);

/* The text as written. */
const char *sq_cond_source(const struct sq_cond *c);

#endif
