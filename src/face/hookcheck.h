/* face/hookcheck.h - a plan's script: checked before a run.
 *
 * The plan loader knows only the names a step's before: / after: give; whether they are
 * functions of the script is known once Lua has run it. sq_plan_hooks_check() does that once, on
 * the main thread, before any connection is made, so a plan whose hooks do not resolve is
 * refused like any other bad plan. Each worker then builds its own state (worker.c: one
 * lua_State per worker thread) and finds the same functions again.
 */
#ifndef SQ_FACE_HOOKCHECK_H
#define SQ_FACE_HOOKCHECK_H

#include <stddef.h>

#include "base/err.h"
#include "plan/plan.h"

/* 0 when the plan has no script, or when its script loads and every before/after names one of
 * its functions; else -SQ_EPARSE with err: "hooks.lua:4: unexpected symbol near ')'" (the
 * script does not load), or "plan.yaml:12:15: scenarios.s.flow[1].after: 'login_aftr' is not a
 * function of hooks.lua". -ENOMEM. */
SQ_MUST_CHECK int sq_plan_hooks_check(const struct sq_plan *p, char *err, size_t errlen);

#endif
