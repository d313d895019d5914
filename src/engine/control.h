/* engine/control.h - changing a run while it goes: an open-loop scenario's arrival rate, a
 * closed-loop scenario's VUs, pausing and resuming.
 *
 * The caller makes a struct sq_run_ctl before the run, names it in struct sq_run_config.ctl, and
 * calls sq_run_control from any other thread while sq_run goes. The controlling thread publishes
 * each change (an append-only schedule and a generation number, with release stores); every
 * worker reads the generation once per turn of its loop (one relaxed load, like the stop flag)
 * and applies what changed at once. Workers take no lock.
 *
 * Open loop: a new rate applies from the change onward. The arrival schedule is piecewise: up to
 * the change the executor's (or the earlier changes'), from it a constant rate, rebased on the
 * arrivals expected at the change, so a raise releases no burst of "missed" arrivals and the
 * arrivals of the run are exactly the schedule's (sum of each piece's rate times its length).
 * Pause: no arrival is due while paused (none is counted, none dropped); resume goes on at the
 * rate in force at the pause (or the one set meanwhile). In-flight requests finish either way.
 *
 * Closed loop (constant-vus, ramping-vus): VUs may be lowered and raised back up to the VUs the
 * scenario opened at its start (its peak; the connections are open already): a lowered VU parks
 * after its current iteration, a raised one starts its next at once; the override replaces a
 * ramp's schedule. Pause parks every VU after its iteration; resume wakes those the target
 * allows. Iteration executors take pause and resume only.
 */
#ifndef SQ_ENGINE_CONTROL_H
#define SQ_ENGINE_CONTROL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "result/result.h"

struct sq_run_ctl; /* opaque; the creator owns it */

#define SQ_CTL_MAX_CHANGES 256 /* changes per run; beyond it sq_run_control refuses */

/* Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_run_ctl_new(struct sq_run_ctl **out);
/* Frees it (NULL: no-op). Not while a run that names it goes. */
void sq_run_ctl_free(struct sq_run_ctl *c);

/* What a scenario runs at, after a change. */
struct sq_ctl_state {
    double t_s;   /* the change's time, s after the run's common start */
    int open;     /* the scenario is open loop */
    double rate;  /* open loop: arrivals per second now (0 while paused) */
    uint32_t vus; /* closed loop: VUs now (0 while paused) */
    int paused;
};

/* Applies kind with value (rate: arrivals per second, > 0; vus: 0 .. the scenario's peak) to
 * scenario scen (-1: every scenario it fits; the quick face has one). Returns 0 (the change is
 * recorded in the result's controls, *st the first scenario's state after it, st may be NULL),
 * or -SQ_EUSAGE (a value out of range or a change that does not fit the scenario: why says so),
 * -EAGAIN (no run is going, or it has not started or is ending) or -ENOSPC (too many changes). */
SQ_MUST_CHECK int sq_run_control(struct sq_run_ctl *c, enum sq_control_kind kind, double value,
                                 int scen, struct sq_ctl_state *st, char *why, size_t whylen);

/* Applies a change written as JSON, what POST /runs/{id}/control (docs/daemon.md) and a CLI run's
 * --control endpoint (docs/quick.md) take: exactly one of {"rate": N}, {"vus": N},
 * {"pause": true}, {"resume": true}, with an optional "scenario": NAME (a plan run's; absent:
 * every scenario the change fits). Returns what sq_run_control returns (-SQ_EUSAGE also for a
 * body that is not one change, why saying so); on success *answer is the scenario's state after
 * it, {"kind", "value", "t_s", "open", "rate", "vus", "paused"} (the caller's; NULL when out of
 * memory). */
SQ_MUST_CHECK int sq_run_ctl_json(struct sq_run_ctl *c, const char *body, size_t len,
                                  json_t **answer, char *why, size_t whylen);

/* A scenario's state as the answers above give it: {"t_s", "open", "rate", "vus", "paused"}. */
json_t *sq_run_ctl_state_json(const struct sq_ctl_state *st);

/* The index of the scenario named name in the run going (a plan run), or -1 (no such scenario,
 * or no run going). */
int sq_run_ctl_scenario(struct sq_run_ctl *c, const char *name);

/* The state of scenario scen (0 for the quick face) now; -EAGAIN when no run is going. */
SQ_MUST_CHECK int sq_run_ctl_state(struct sq_run_ctl *c, int scen, struct sq_ctl_state *st);

#endif
