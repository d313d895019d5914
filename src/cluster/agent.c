/* cluster/agent.c - `squall agent`: wait for work on NATS, run one segment of a test, stream it.
 *
 * Two threads. The main thread owns the NATS connection's reading side: it answers discovery,
 * takes an assignment (prepares the job through the face, measures the clock offset to the
 * controller with a burst of request/reply round trips), passes the common start time and stop
 * requests to the run, sends heartbeats and, when the run is over, the final result. The runner
 * thread is sq_run() itself: its on_ready publishes "ready" once the pools are open, and its
 * on_tick (the run's main thread, once a second) publishes each second's figures and histograms.
 * The runner thread never publishes: on_ready raises a flag and on_tick puts the second in the
 * outbox, and the main thread sends both (within POLL_NS), so only the main thread touches the
 * connection, which it may be redialling. The two threads share the stop flag, the start time,
 * the ready and done flags (atomics) and the outbox (its mutex).
 *
 * A broker that goes away (docs/distributed.md, "NATS outages"): the main thread redials the
 * same URL every BUSY_RETRY_NS while a run is on, and the run goes on meanwhile. Its seconds
 * stay in the outbox until the controller acknowledges them (the "ack" of its heartbeats: every
 * second up to that one arrived); the ones never sent go out in order once the connection is
 * back, and a second still unacknowledged RESEND_NS after it was sent is sent again (the
 * controller drops duplicates), which covers what NATS dropped while the controller itself was
 * away. The final result is kept and sent again every FINAL_RESEND_NS until the controller says
 * "got". Past the run's outage window (the controller's --nats-outage, in the assignment) the
 * controller has given up: the run is stopped and its result dropped. The outbox is bounded by
 * that window; beyond it the oldest second goes (and its counts still reach the final result).
 *
 * Clocks: the agent's clock is CLOCK_MONOTONIC (plus clock_skew_ns in tests). The controller
 * names the start in its own clock; the agent starts at that time plus its estimated offset, so
 * every agent starts together within the estimates' uncertainty (half a round trip to NATS and
 * back, typically well under a millisecond on a LAN) plus its own wake-up error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/redact.h"
#include "cluster/cluster.h"
#include "cluster/internal.h"
#include "cluster/wire.h"
#include "stats/hist.h"

#define SYNC_SAMPLES    16
#define SYNC_WAIT_NS    (500 * SQ_NS_PER_MS) /* for one time answer */
#define POLL_NS         (50 * SQ_NS_PER_MS)
#define BUSY_RETRY_NS   (250 * SQ_NS_PER_MS) /* redialling NATS with a run on */
#define DIAL_NS         (2 * SQ_NS_PER_S)    /* one redial, at most */
#define RESEND_NS       SQ_NS_PER_S          /* a second still unacknowledged this long after */
#define FINAL_RESEND_NS (2 * SQ_NS_PER_S)    /* the final result, until "got" */
#define OUTBOX_MIN      64                   /* seconds kept unacknowledged, at least */
/* An agent gives up on a run this long after the controller would have: an outage just under the
 * window, seen a little later by the controller, is still ridden out by every agent. */
#define GIVE_UP_LATE_NS (2 * SQ_NS_PER_S)

/* One second waiting for the controller's acknowledgement. */
struct pending {
    uint32_t n;      /* the second, 1-based */
    int64_t sent_ns; /* when it was last sent; 0: not yet (or due again) */
    char *text;
    size_t len;
};

struct agent {
    const struct sq_agent_config *cfg;
    const char *prefix;
    char id[17], name[128], host[100];
    char self[SQ_CLUSTER__SUBJ], discover[SQ_CLUSTER__SUBJ];
    struct sq_ctlbus *bus;
    uint64_t sid_discover, sid_self;
    int proto;
    /* the job in progress (busy) */
    bool busy, runner, orphaned;
    char run[40], ctl[SQ_CLUSTER__SUBJ];
    struct sq_seg seg;
    void *handle;
    struct sq_run_config *rc;
    bool empty; /* its segment has no VU of any scenario */
    pthread_t tid;
    int done;          /* atomic: the runner thread has finished */
    volatile int stop; /* the run's stop flag */
    int64_t start_at;  /* atomic: the common start, CLOCK_MONOTONIC; 0 until known */
    struct sq_result res;
    int run_rc;
    const char *run_why;
    struct sq_clock_est clk;
    int64_t last_ctl, next_hb;
    uint32_t seconds;  /* seconds made (atomic: the runner's on_tick counts them) */
    char error[320];   /* why the job failed before running */
    int ready_due;     /* atomic: on_ready ran; the main thread says "ready" */
    bool served;       /* a run came and went (--once: then return) */
    int64_t outage_ns; /* the run's outage window (assign's "outage_ns") */
    bool given_up;     /* NATS was away past the window: the run is stopped, its result dropped */
    /* the outbox: seconds not yet acknowledged, oldest first (out_mu: on_tick appends) */
    pthread_mutex_t out_mu;
    struct pending *out;
    size_t nout, out_max;
    uint64_t out_dropped;
    /* the final result, kept until the controller says "got" */
    char *final;
    int64_t final_sent;
    /* the connection: down since down_ns (redialling) */
    bool down;
    int64_t down_ns;
};

static void logf_(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct agent *a, const char *fmt, ...)
{
    if (!a->cfg->log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    a->cfg->log(a->cfg->ud, line);
}

static int64_t agent_now(const struct agent *a)
{
    return sq_now_ns() + a->cfg->clock_skew_ns;
}

static void pub(struct agent *a, const char *subject, const char *reply, json_t *o)
{
    if (a->bus && sq_cluster__pub_json(a->bus, subject, reply, o) < 0)
        logf_(a, "could not publish to %s: %s", subject, sq_ctlbus_error(a->bus));
    else if (!a->bus)
        json_decref(o);
}

/* The run's stop flag is written here and read by the run's watchdog on the runner thread. */
static void stop_run(struct agent *a)
{
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
}

static bool stopped(struct agent *a)
{
    return __atomic_load_n(&a->stop, __ATOMIC_ACQUIRE) != 0;
}

/* ---- the runner thread and the run's callbacks ---- */

static void say_ready(struct agent *a)
{
    pub(a, a->ctl, NULL,
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:i}", "op", "ready", "agent", a->id, "run",
                  a->run, "offset_ns", (json_int_t)a->clk.offset_ns, "uncertainty_ns",
                  (json_int_t)a->clk.uncertainty_ns, "rtt_ns", (json_int_t)a->clk.rtt_ns, "samples",
                  (int)a->clk.samples));
}

/* The runner thread: the pools are open. The main thread says so (it owns the connection). */
static void on_ready(void *ud)
{
    struct agent *a = ud;
    __atomic_store_n(&a->ready_due, 1, __ATOMIC_RELEASE);
}

/* The runner thread, once a second: the second goes to the outbox; the main thread sends it. */
static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    struct agent *a = ud;
    json_t *o = sq_wire_second(s, h, hu);
    if (!o)
        return;
    uint32_t n = __atomic_add_fetch(&a->seconds, 1, __ATOMIC_RELAXED);
    json_object_set_new(o, "op", json_string("iv"));
    json_object_set_new(o, "agent", json_string(a->id));
    json_object_set_new(o, "run", json_string(a->run));
    json_object_set_new(o, "n", json_integer(n));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return;
    pthread_mutex_lock(&a->out_mu);
    if (a->nout == a->out_max) {
        /* the controller has heard nothing for longer than the window: the oldest goes (its
         * counts are still in the final result) */
        free(a->out[0].text);
        memmove(a->out, a->out + 1, (a->nout - 1) * sizeof(*a->out));
        a->nout--;
        a->out_dropped++;
    }
    a->out[a->nout++] = (struct pending){.n = n, .text = text, .len = strlen(text)};
    pthread_mutex_unlock(&a->out_mu);
}

/* The main thread: sends what the outbox has not sent (in order), while the connection works. */
static void flush_out(struct agent *a)
{
    int64_t now = sq_now_ns();
    pthread_mutex_lock(&a->out_mu);
    for (size_t i = 0; i < a->nout && !a->down; i++) {
        struct pending *p = &a->out[i];
        if (p->sent_ns)
            continue;
        if (sq_ctlbus_pub(a->bus, a->ctl, NULL, p->text, p->len) < 0)
            break; /* the next read finds the connection gone; sent again once it is back */
        p->sent_ns = now;
    }
    pthread_mutex_unlock(&a->out_mu);
}

/* The controller's heartbeat says every second up to ack arrived: those go; any other sent
 * RESEND_NS ago or more is sent again (NATS dropped it, or the controller was away). */
static void on_ack(struct agent *a, uint32_t ack)
{
    int64_t now = sq_now_ns();
    pthread_mutex_lock(&a->out_mu);
    size_t k = 0;
    while (k < a->nout && a->out[k].n <= ack)
        free(a->out[k++].text);
    memmove(a->out, a->out + k, (a->nout - k) * sizeof(*a->out));
    a->nout -= k;
    for (size_t i = 0; i < a->nout; i++)
        if (a->out[i].sent_ns && now - a->out[i].sent_ns >= RESEND_NS)
            a->out[i].sent_ns = 0;
    pthread_mutex_unlock(&a->out_mu);
}

static bool out_sent(struct agent *a)
{
    pthread_mutex_lock(&a->out_mu);
    bool all = true;
    for (size_t i = 0; i < a->nout && all; i++)
        all = a->out[i].sent_ns != 0;
    pthread_mutex_unlock(&a->out_mu);
    return all;
}

static void out_clear(struct agent *a)
{
    pthread_mutex_lock(&a->out_mu);
    for (size_t i = 0; i < a->nout; i++)
        free(a->out[i].text);
    a->nout = 0;
    pthread_mutex_unlock(&a->out_mu);
}

static void *runner_main(void *arg)
{
    struct agent *a = arg;
    if (!a->empty) {
        a->run_rc = sq_run(a->rc, &a->res, &a->run_why);
    } else {
        /* No share of any scenario (7 VUs over 8 agents): take part in the start, run nothing. */
        on_ready(a);
        for (;;) {
            int64_t at = __atomic_load_n(&a->start_at, __ATOMIC_ACQUIRE);
            if (stopped(a) || (at && sq_now_ns() >= at))
                break;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
            nanosleep(&ts, NULL);
        }
        memset(&a->res, 0, sizeof(a->res));
        a->run_rc = sq_latency_hist_new(&a->res.latency);
        a->run_why = "out of memory";
        a->res.start_mono_ns = __atomic_load_n(&a->start_at, __ATOMIC_ACQUIRE);
        a->res.aborted = stopped(a);
        if (a->res.aborted)
            snprintf(a->res.abort_reason, sizeof(a->res.abort_reason), "stopped by request");
    }
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- the job ---- */

/* The final message: the result, or why there is none. NULL when out of memory. */
static char *final_text(struct agent *a)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "op", "final", "agent", a->id, "run", a->run);
    if (!o)
        return NULL;
    if (!a->runner) {
        json_object_set_new(o, "error", json_string(a->error));
    } else if (a->run_rc < 0) {
        char why[320];
        snprintf(why, sizeof(why), "%s: %s", a->run_why ? a->run_why : "the run failed",
                 sq_strerror(a->run_rc));
        json_object_set_new(o, "error", json_string(why));
    } else {
        json_t *r = sq_wire_result(&a->res);
        int64_t at = __atomic_load_n(&a->start_at, __ATOMIC_ACQUIRE);
        if (r)
            json_object_set_new(o, "result", r);
        else
            json_object_set_new(o, "error", json_string("out of memory encoding the result"));
        json_object_set_new(o, "setup_ns", json_integer(a->res.setup_ns));
        if (at && a->res.start_mono_ns)
            json_object_set_new(o, "start_late_ns", json_integer(a->res.start_mono_ns - at));
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* Sends the final result (again); 0 when it went out. */
static int send_final(struct agent *a)
{
    if (!a->bus || a->down)
        return -EPIPE;
    int rc = sq_cluster__pub_big(a->bus, a->ctl, a->run, a->id, a->final, strlen(a->final));
    if (rc < 0)
        logf_(a, "run %s: could not send the result: %s", a->run, sq_ctlbus_error(a->bus));
    return rc;
}

/* The job is over (its result delivered, or given up): the agent is idle again. */
static void job_release(struct agent *a)
{
    if (a->runner && a->run_rc == 0 && !a->given_up)
        logf_(a, "run %s: done, %llu requests completed%s%s", a->run,
              (unsigned long long)a->res.c.completed, a->res.aborted ? ", stopped: " : "",
              a->res.aborted ? a->res.abort_reason : "");
    if (a->given_up && a->final)
        logf_(a, "run %s: its result is dropped: the controller gave up on it", a->run);
    if (a->runner)
        a->served = true;
    if (a->out_dropped)
        logf_(a, "run %s: %llu seconds were dropped unacknowledged (the outbox holds %zu)", a->run,
              (unsigned long long)a->out_dropped, a->out_max);
    out_clear(a);
    free(a->final);
    a->final = NULL;
    a->final_sent = 0;
    sq_result_dispose(&a->res);
    memset(&a->res, 0, sizeof(a->res));
    if (a->handle)
        a->cfg->release(a->cfg->ud, a->handle);
    a->handle = NULL;
    a->rc = NULL;
    sq_seg_dispose(&a->seg);
    a->busy = a->runner = a->orphaned = a->given_up = false;
    a->done = 0;
    a->stop = 0;
    a->start_at = 0;
    a->seconds = 0;
    a->ready_due = 0;
    a->out_dropped = 0;
    a->error[0] = '\0';
}

/* The run is over (or never started): joins the runner, keeps the final message. A job that
 * never ran (its clock round trips failed) sends it once and is released: no controller waits
 * for it. */
static void job_end(struct agent *a)
{
    if (a->runner)
        pthread_join(a->tid, NULL);
    a->final = final_text(a);
    if (!a->final) {
        logf_(a, "run %s: out of memory building the result", a->run);
        job_release(a);
        return;
    }
    if (!a->runner) {
        (void)send_final(a);
        job_release(a);
    }
}

static void refuse(struct agent *a, const char *reply, const char *run, const char *why)
{
    pub(a, reply, NULL,
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "op", "refuse", "agent", a->id, "name",
                  a->name, "run", run, "why", why, "version", SQ_VERSION, "proto", a->proto));
}

static void handle(struct agent *a, const struct sq_ctlbus_msg *m);

/* Round trips to the controller's clock; the shortest gives the offset. */
static int clock_sync(struct agent *a)
{
    struct sq_clock_sample s[SYNC_SAMPLES];
    size_t n = 0;
    for (int i = 0; i < SYNC_SAMPLES && !stopped(a); i++) {
        int64_t t0 = agent_now(a);
        pub(a, a->ctl, a->self,
            json_pack("{s:s, s:s, s:s, s:i}", "op", "time", "agent", a->id, "run", a->run, "n", i));
        int64_t deadline = sq_now_ns() + SYNC_WAIT_NS;
        for (;;) {
            int64_t left = deadline - sq_now_ns();
            struct sq_ctlbus_msg m;
            int rc = left > 0 ? sq_ctlbus_next(a->bus, left, &m) : 0;
            if (rc < 0)
                return rc;
            if (rc == 0)
                break; /* this sample is lost; try the next */
            int64_t t3 = agent_now(a);
            json_t *o = json_loadb(m.data, m.len, 0, NULL);
            if (o && strcmp(sq_cluster__str(o, "op"), "time") == 0 &&
                strcmp(sq_cluster__str(o, "run"), a->run) == 0) {
                json_t *tn = json_object_get(o, "n"), *tc = json_object_get(o, "t");
                bool mine = json_is_integer(tn) && json_integer_value(tn) == i;
                if (mine && json_is_integer(tc))
                    s[n++] = (struct sq_clock_sample){t0, (int64_t)json_integer_value(tc), t3};
                json_decref(o);
                sq_ctlbus_msg_dispose(&m);
                if (mine)
                    break;
                continue;
            }
            json_decref(o);
            handle(a, &m); /* a stop, a heartbeat, another controller's discovery */
            sq_ctlbus_msg_dispose(&m);
        }
    }
    return sq_clock_estimate(s, n, &a->clk);
}

static bool seg_empty(const struct sq_run_config *rc, const struct sq_seg *seg)
{
    uint32_t ns = rc->scens ? rc->nscens : 1;
    for (uint32_t i = 0; i < ns; i++) {
        const struct sq_exec *e = rc->scens ? &rc->scens[i].exec : &rc->exec;
        if (sq_seg_share(seg, sq_exec_max_vus(e)) > 0)
            return false;
    }
    return true;
}

static void assign(struct agent *a, const json_t *o, const char *reply)
{
    const char *run = sq_cluster__str(o, "run");
    char why[640];
    if (a->busy) {
        snprintf(why, sizeof(why), "agent %s is busy with run %s", a->name, a->run);
        refuse(a, reply, run, why);
        return;
    }
    json_t *jp = json_object_get(o, "proto");
    if (!json_is_integer(jp) || json_integer_value(jp) != a->proto) {
        snprintf(why, sizeof(why),
                 "agent %s is squall %s (cluster protocol %d); the controller speaks cluster "
                 "protocol %lld",
                 a->name, SQ_VERSION, a->proto, json_is_integer(jp) ? json_integer_value(jp) : -1);
        refuse(a, reply, run, why);
        return;
    }
    if (!sq_cluster__token_ok(run)) {
        refuse(a, reply, run, "the run id is not a subject token");
        return;
    }
    struct sq_rat pt[SQ_SEG_MAX_PARTS + 1];
    uint32_t np = 0;
    const char *seq_why = NULL;
    json_t *ji = json_object_get(o, "index");
    const json_t *job = json_object_get(o, "job");
    int rc = sq_seg_parse_sequence(sq_cluster__str(o, "sequence"), pt, SQ_SEG_MAX_PARTS + 1, &np,
                                   &seq_why);
    if (rc == 0 && (!json_is_integer(ji) || json_integer_value(ji) < 0 ||
                    json_integer_value(ji) >= (json_int_t)np - 1))
        rc = -SQ_EUSAGE, seq_why = "the agent's index is not in the sequence";
    if (rc == 0)
        rc = sq_seg_init(&a->seg, pt, np, (uint32_t)json_integer_value(ji), &seq_why);
    if (rc < 0) {
        snprintf(why, sizeof(why), "%s", seq_why ? seq_why : sq_strerror(rc));
        refuse(a, reply, run, why);
        return;
    }
    char *text = job ? json_dumps(job, JSON_COMPACT) : NULL;
    char err[1024] = "";
    rc = text ? a->cfg->prepare(a->cfg->ud, text, strlen(text), &a->seg, &a->rc, &a->handle, err,
                                sizeof(err))
              : -SQ_EPARSE;
    free(text);
    if (rc < 0) {
        if (!err[0])
            snprintf(err, sizeof(err), "the job cannot be run: %s", sq_strerror(rc));
        snprintf(why, sizeof(why), "agent %s: %.380s", a->name, err);
        refuse(a, reply, run, why);
        if (a->handle)
            a->cfg->release(a->cfg->ud, a->handle);
        a->handle = NULL;
        sq_seg_dispose(&a->seg);
        return;
    }
    snprintf(a->run, sizeof(a->run), "%s", run);
    snprintf(a->ctl, sizeof(a->ctl), "%s.ctl.%s", a->prefix, run);
    json_t *jo = json_object_get(o, "outage_ns");
    a->outage_ns = json_is_integer(jo) && json_integer_value(jo) > 0
                       ? (int64_t)json_integer_value(jo)
                       : SQ_CLUSTER_OUTAGE_NS;
    /* the window's seconds and a margin: a second is acknowledged within one heartbeat */
    int64_t keep = a->outage_ns / SQ_NS_PER_S * 2 + OUTBOX_MIN;
    a->out_max = keep > 4096 ? 4096 : (size_t)keep;
    struct pending *ob = realloc(a->out, a->out_max * sizeof(*ob));
    if (!ob) {
        refuse(a, reply, run, "out of memory");
        if (a->handle)
            a->cfg->release(a->cfg->ud, a->handle);
        a->handle = NULL;
        sq_seg_dispose(&a->seg);
        return;
    }
    a->out = ob;
    a->busy = true;
    a->last_ctl = sq_now_ns();
    a->next_hb = a->last_ctl;
    a->rc->seg = &a->seg;
    a->rc->stop = &a->stop;
    a->rc->start_at = &a->start_at;
    a->rc->on_ready = on_ready;
    a->rc->ready_ud = a;
    a->rc->on_tick = on_tick;
    a->rc->tick_ud = a;
    a->empty = seg_empty(a->rc, &a->seg);
    pub(a, reply, NULL,
        json_pack("{s:s, s:s, s:s}", "op", "accept", "agent", a->id, "run", a->run));
    char from[32], to[32];
    sq_rat_format(a->seg.from, from, sizeof(from));
    sq_rat_format(a->seg.to, to, sizeof(to));
    rc = clock_sync(a);
    if (rc < 0 || stopped(a)) {
        snprintf(a->error, sizeof(a->error), "%s",
                 stopped(a) ? "stopped before the start"
                            : "the controller answered no clock round trip in time");
        logf_(a, "run %s: %s", a->run, a->error);
        job_end(a);
        return;
    }
    logf_(a, "run %s: segment %s:%s (%u of %u), clock offset %+.3f ms +- %.3f ms", a->run, from, to,
          a->seg.index + 1, a->seg.count, (double)a->clk.offset_ns / 1e6,
          (double)a->clk.uncertainty_ns / 1e6);
    rc = -pthread_create(&a->tid, NULL, runner_main, a);
    if (rc < 0) {
        snprintf(a->error, sizeof(a->error), "could not start the run's thread: %s",
                 sq_strerror(rc));
        job_end(a);
        return;
    }
    a->runner = true;
}

static void handle(struct agent *a, const struct sq_ctlbus_msg *m)
{
    json_t *o = json_loadb(m->data, m->len, 0, NULL);
    if (!o)
        return;
    const char *op = sq_cluster__str(o, "op");
    const char *run = sq_cluster__str(o, "run");
    bool mine = a->busy && strcmp(run, a->run) == 0;
    if (m->sid == a->sid_discover && strcmp(op, "discover") == 0 && m->reply[0]) {
        json_t *jp = json_object_get(o, "proto");
        if (!json_is_integer(jp) || json_integer_value(jp) != a->proto) {
            char why[512];
            snprintf(why, sizeof(why),
                     "agent %s is squall %s (cluster protocol %d); the controller is squall %s "
                     "(cluster protocol %lld)",
                     a->name, SQ_VERSION, a->proto, sq_cluster__str(o, "version"),
                     json_is_integer(jp) ? json_integer_value(jp) : -1);
            refuse(a, m->reply, run, why);
        } else {
            json_t *h = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s}", "op", "hello", "agent",
                                  a->id, "name", a->name, "host", a->host, "proto", a->proto,
                                  "version", SQ_VERSION, "state", a->busy ? "busy" : "idle");
            if (h && a->cfg->labels)
                json_object_set(h, "labels", (json_t *)a->cfg->labels);
            pub(a, m->reply, NULL, h);
        }
    } else if (m->sid == a->sid_self) {
        if (strcmp(op, "assign") == 0 && m->reply[0]) {
            assign(a, o, m->reply);
        } else if (mine && strcmp(op, "start") == 0) {
            json_t *at = json_object_get(o, "at_ns");
            if (json_is_integer(at)) {
                /* the controller's time, in this agent's monotonic clock */
                int64_t local =
                    (int64_t)json_integer_value(at) + a->clk.offset_ns - a->cfg->clock_skew_ns;
                __atomic_store_n(&a->start_at, local, __ATOMIC_RELEASE);
            }
            a->last_ctl = sq_now_ns();
        } else if (mine && (strcmp(op, "stop") == 0 || strcmp(op, "release") == 0)) {
            stop_run(a);
            logf_(a, "run %s: stop requested (%s)", a->run, sq_cluster__str(o, "why"));
        } else if (mine && strcmp(op, "hb") == 0) {
            a->last_ctl = sq_now_ns();
            json_t *ack = json_object_get(o, "ack");
            if (json_is_integer(ack) && json_integer_value(ack) >= 0)
                on_ack(a, json_integer_value(ack) > UINT32_MAX ? UINT32_MAX
                                                               : (uint32_t)json_integer_value(ack));
        } else if (mine && strcmp(op, "got") == 0) {
            a->last_ctl = sq_now_ns();
            if (a->final)
                job_release(a); /* the controller has the result */
        }
    }
    json_decref(o);
}

/* ---- connection ---- */

static int connect_bus(struct agent *a, char *err, size_t len)
{
    char cname[200];
    snprintf(cname, sizeof(cname), "squall-agent %s", a->name);
    int rc = sq_ctlbus_connect(a->cfg->nats_url, cname, &a->cfg->nats_tls, a->cfg->nats_tls_first,
                               5 * SQ_NS_PER_S, &a->bus, err, len);
    if (rc < 0)
        return rc;
    rc = sq_ctlbus_sub(a->bus, a->discover, &a->sid_discover);
    if (rc == 0)
        rc = sq_ctlbus_sub(a->bus, a->self, &a->sid_self);
    if (rc == 0)
        rc = sq_ctlbus_sync(a->bus, 5 * SQ_NS_PER_S);
    if (rc < 0) {
        snprintf(err, len, "%s", sq_ctlbus_error(a->bus));
        sq_ctlbus_close(a->bus);
        a->bus = NULL;
    }
    return rc;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / SQ_NS_PER_S, .tv_nsec = ns % SQ_NS_PER_S};
    nanosleep(&ts, NULL);
}

/* The controller has been silent for SQ_CLUSTER_ORPHAN_NS (or the outage window). Silent, or
 * cut off? A PING to the
 * server tells: no PONG, and the connection is the one that failed (an outage, not an orphan). */
static bool broker_answers(struct agent *a)
{
    return sq_ctlbus_sync(a->bus, SQ_NS_PER_S) == 0;
}

/* While busy, on the main thread, after each read: say ready, send the outbox, heartbeats,
 * watch the controller, and deliver the result once the run is over. */
static void busy_work(struct agent *a)
{
    int64_t now = sq_now_ns();
    if (__atomic_exchange_n(&a->ready_due, 0, __ATOMIC_ACQ_REL))
        say_ready(a);
    flush_out(a);
    if (a->down)
        return;
    if (now >= a->next_hb) {
        pub(a, a->ctl, NULL,
            json_pack("{s:s, s:s, s:s, s:i}", "op", "hb", "agent", a->id, "run", a->run, "seconds",
                      (int)__atomic_load_n(&a->seconds, __ATOMIC_RELAXED)));
        a->next_hb = now + SQ_CLUSTER_HB_NS;
    }
    /* a controller cut off from NATS rides out the window: it is not gone before that */
    int64_t orphan = a->outage_ns > SQ_CLUSTER_ORPHAN_NS ? a->outage_ns : SQ_CLUSTER_ORPHAN_NS;
    if (!a->orphaned && now - a->last_ctl > orphan) {
        if (!broker_answers(a)) {
            a->down = true; /* the main loop redials */
            a->down_ns = sq_now_ns();
            logf_(a, "NATS does not answer: %s; reconnecting", sq_ctlbus_error(a->bus));
            return;
        }
        a->orphaned = true;
        stop_run(a);
        logf_(a, "run %s: the controller is silent; stopping", a->run);
    }
    if (a->runner && !a->final && __atomic_load_n(&a->done, __ATOMIC_ACQUIRE))
        job_end(a);
    if (!a->final)
        return;
    if (a->orphaned) { /* nobody to confirm it: send it once, as a last word */
        (void)send_final(a);
        job_release(a);
        return;
    }
    /* after every second it sent: the controller's live seconds come first */
    if (out_sent(a) && (!a->final_sent || now - a->final_sent >= FINAL_RESEND_NS) &&
        send_final(a) == 0)
        a->final_sent = now;
}

int sq_agent_serve(const struct sq_agent_config *cfg, char *err, size_t len)
{
    struct agent *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->cfg = cfg;
    a->prefix = cfg->prefix ? cfg->prefix : SQ_CLUSTER_PREFIX;
    a->proto = cfg->proto ? cfg->proto : SQ_CLUSTER_PROTO;
    pthread_mutex_init(&a->out_mu, NULL);
    sq_cluster__rand_id(a->id);
    if (gethostname(a->host, sizeof(a->host)) < 0)
        snprintf(a->host, sizeof(a->host), "?");
    a->host[sizeof(a->host) - 1] = '\0';
    if (cfg->name)
        snprintf(a->name, sizeof(a->name), "%s", cfg->name);
    else
        snprintf(a->name, sizeof(a->name), "%s-%ld", a->host, (long)getpid());
    snprintf(a->self, sizeof(a->self), "%s.agent.%s", a->prefix, a->id);
    snprintf(a->discover, sizeof(a->discover), "%s.discover", a->prefix);
    int64_t backoff = 500 * SQ_NS_PER_MS;
    bool said = false;
    int result = 0;
    while (!*cfg->quit && !(cfg->once && a->served)) {
        if (!a->bus || a->down) {
            char why[512];
            int rc = a->bus ? sq_ctlbus_reconnect(a->bus, DIAL_NS, why, sizeof(why))
                            : connect_bus(a, why, sizeof(why));
            /* a URL or TLS option it cannot use; or, at the first dial, TLS that fails (a
             * certificate that does not verify will not verify on the next try either) */
            if (rc == -SQ_EUSAGE || (rc == -SQ_ETLS && !a->bus)) {
                snprintf(err, len, "%s", why);
                result = rc;
                break;
            }
            int64_t now = sq_now_ns();
            if (rc < 0) {
                if (!said)
                    logf_(a, "waiting for NATS: %s", why);
                said = true;
                if (a->busy && !a->given_up && a->bus &&
                    now - a->down_ns > a->outage_ns + GIVE_UP_LATE_NS) {
                    /* the controller has given up on this run too */
                    a->given_up = true;
                    stop_run(a);
                    logf_(a,
                          "run %s: NATS unreachable for more than %g s; stopping (its result "
                          "cannot reach the controller)",
                          a->run, (double)(a->outage_ns + GIVE_UP_LATE_NS) / 1e9);
                }
                if (a->busy && a->given_up && a->runner && !a->final &&
                    __atomic_load_n(&a->done, __ATOMIC_ACQUIRE))
                    job_end(a);
                if (a->busy && a->given_up && a->final)
                    job_release(a);
                sleep_ns(a->busy ? BUSY_RETRY_NS : backoff);
                if (!a->busy)
                    backoff = backoff * 2 > 5 * SQ_NS_PER_S ? 5 * SQ_NS_PER_S : backoff * 2;
                continue;
            }
            if (a->down)
                logf_(a, "NATS is back after %.1f s", (double)(now - a->down_ns) / 1e9);
            a->down = false;
            said = false;
            backoff = 500 * SQ_NS_PER_MS;
            /* the controller gets as long as it would have had to speak */
            a->last_ctl = now;
            /* the URL's password or token stays out of the log */
            size_t at = 0, n = 0;
            bool secret = sq_redact_url_secret(cfg->nats_url, strlen(cfg->nats_url), &at, &n);
            logf_(a, "agent %s (%s) ready on %.*s%s%s", a->name, a->id, (int)(secret ? at : 0),
                  cfg->nats_url, secret ? SQ_REDACTED : "", cfg->nats_url + (secret ? at + n : 0));
        }
        struct sq_ctlbus_msg m;
        int rc = sq_ctlbus_next(a->bus, POLL_NS, &m);
        if (rc < 0) {
            logf_(a, "NATS connection lost: %s; reconnecting", sq_ctlbus_error(a->bus));
            a->down = true;
            a->down_ns = sq_now_ns();
            continue;
        }
        if (rc == 1) {
            handle(a, &m);
            sq_ctlbus_msg_dispose(&m);
        }
        if (!a->busy)
            continue;
        busy_work(a);
    }
    if (a->busy) {
        stop_run(a);
        if (a->runner && !a->final)
            job_end(a);
        if (a->final && !a->given_up)
            (void)send_final(a); /* SIGTERM: its result is still sent, once */
        job_release(a);
    }
    sq_ctlbus_close(a->bus);
    free(a->out);
    pthread_mutex_destroy(&a->out_mu);
    free(a);
    return result;
}
