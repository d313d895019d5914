/* face/hookcheck.c - a plan's script: checked before a run (see hookcheck.h). */
#include "face/hookcheck.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "script/script.h"

int sq_plan_hooks_check(const struct sq_plan *p, char *err, size_t errlen)
{
    if (!p->script)
        return 0;
    struct sq_script *s;
    int rc = sq_script_new(p->script, NULL, &s, err, errlen);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return -SQ_EPARSE;
    /* the scenarios, then setup: and teardown: */
    for (size_t i = 0; rc == 0 && i < p->nscenarios + 2; i++) {
        const struct sq_plan_scenario *sc = i < p->nscenarios    ? &p->scenarios[i]
                                            : i == p->nscenarios ? p->setup
                                                                 : p->teardown;
        bool once = i >= p->nscenarios;
        if (!sc)
            continue;
        for (size_t j = 0; rc == 0 && j < sc->nsteps; j++) {
            const struct sq_plan_step *st = &sc->steps[j];
            const char *fn[2] = {st->before, st->after};
            const struct sq_loc *loc[2] = {&st->before_loc, &st->after_loc};
            for (int k = 0; rc == 0 && k < 2; k++) {
                int id;
                if (!fn[k] || (rc = sq_script_hook_find(s, fn[k], &id)) == 0)
                    continue;
                if (rc == -ENOMEM)
                    break;
                snprintf(err, errlen, "%s:%u:%u: %s%s.flow[%zu].%s: '%s' is not a function of %s",
                         p->file, loc[k]->line, loc[k]->col, once ? "" : "scenarios.", sc->name, j,
                         k ? "after" : "before", fn[k], p->script);
                rc = -SQ_EPARSE;
            }
        }
    }
    sq_script_free(s);
    return rc;
}
