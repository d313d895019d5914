/* face/distopts.c - see distopts.h. */
#include "face/distopts.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/parse.h"
#include "face/flags.h"
#include "plan/exec.h"

const char sq_distopts_usage[] =
    "      --agents N          run on N agents (squall agent) found over NATS instead of here;\n"
    "                          each runs its execution segment of the load (docs/distributed.md)\n"
    "      --nats URL          with --agents: the NATS server (nats://host:4222; tls://host:4222\n"
    "                          for NATS over TLS)\n"
    "      --nats-cacert FILE  tls://: the CAs that sign the NATS server's certificate\n"
    "                          (default: the system's)\n"
    "      --nats-cert FILE, --nats-key FILE  tls://: a client certificate (mutual TLS)\n"
    "      --nats-insecure     tls://: do not verify the NATS server's certificate\n"
    "      --nats-tls-first    tls://: shake hands before the server's INFO (a server with\n"
    "                          tls { handshake_first: true })\n"
    "      --agent-wait D      how long to look for idle agents (default 10s)\n"
    "      --tolerate-agent-loss  exit 0 when an agent is lost mid-run (its data up to the loss\n"
    "                          is kept either way)\n"
    "      --subject-prefix P  the NATS subjects' prefix, as the agents' (default squall)\n"
    "      --segments SEQ      the execution segment sequence, e.g. 0,1/2,3/4,1 (default: even)\n"
    "      --nats-outage D     the NATS outage a run rides out (default 10s); longer, the result\n"
    "                          has what arrived, marked incomplete, and the exit code is 1\n"
    "      --control [HOST:]PORT  a control endpoint on loopback while the run goes: change its\n"
    "                          rate or VUs, pause, resume (squall control; docs/quick.md)\n";

bool sq_distopts_prefix_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > 64 || p[0] == '.' || p[n - 1] == '.' || strstr(p, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* --control's [HOST:]PORT: PORT alone (127.0.0.1), 127.x.y.z:PORT, localhost:PORT or
 * [::1]:PORT. */
static int control_addr(const char *arg, char *host, size_t hlen, uint16_t *port)
{
    const char *colon = strrchr(arg, ':');
    const char *p = colon ? colon + 1 : arg;
    uint64_t v;
    if (sq_parse_u64(p, 0, 65535, 0, &v) < 0)
        return -SQ_EUSAGE;
    *port = (uint16_t)v;
    size_t n = colon ? (size_t)(colon - arg) : 0;
    if (!colon || (n == 9 && memcmp(arg, "localhost", 9) == 0)) {
        snprintf(host, hlen, "%s", "127.0.0.1");
        return 0;
    }
    if (n == 5 && memcmp(arg, "[::1]", 5) == 0) {
        snprintf(host, hlen, "%s", "::1");
        return 0;
    }
    struct in_addr a;
    char buf[48];
    if (n >= sizeof(buf))
        return -SQ_EUSAGE;
    memcpy(buf, arg, n);
    buf[n] = 0;
    if (inet_pton(AF_INET, buf, &a) != 1 || (ntohl(a.s_addr) >> 24) != 127)
        return -SQ_EUSAGE;
    snprintf(host, hlen, "%s", buf);
    return 0;
}

int sq_distopts_flag(struct sq_distopts *d, int opt, const char *flag, const char *arg, char *err,
                     size_t len)
{
    switch (opt) {
    case SQ_DISTOPT_AGENTS:
        if (sq_parse_u64(arg, 1, SQ_SEG_MAX_PARTS, 0, &d->agents) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not an agent count (1..%d)", flag, arg,
                                SQ_SEG_MAX_PARTS);
        return 1;
    case SQ_DISTOPT_NATS:
        if (!arg[0])
            return sq_flag_fail(err, len, "%s: '' is not a NATS URL (nats://host:4222)", flag);
        d->nats = arg;
        return 1;
    case SQ_DISTOPT_AGENT_WAIT:
        if (sq_parse_duration(arg, SQ_NS_PER_S, &d->agent_wait_ns) < 0 || d->agent_wait_ns <= 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                arg);
        return 1;
    case SQ_DISTOPT_NATS_OUTAGE:
        if (sq_parse_duration(arg, SQ_NS_PER_S, &d->nats_outage_ns) < 0 || d->nats_outage_ns <= 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                arg);
        return 1;
    case SQ_DISTOPT_TOLERATE:
        d->tolerate_loss = true;
        return 1;
    case SQ_DISTOPT_PREFIX:
        if (!sq_distopts_prefix_ok(arg))
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a subject prefix (letters, digits, _ and -, "
                                "in tokens joined by dots)",
                                flag, arg);
        d->prefix = arg;
        return 1;
    case SQ_DISTOPT_CONTROL:
        if (control_addr(arg, d->control_host, sizeof(d->control_host), &d->control_port) < 0)
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a loopback [HOST:]PORT: the control endpoint "
                                "listens on loopback only (PORT, 127.0.0.1:PORT, [::1]:PORT)",
                                flag, arg);
        d->control = arg;
        return 1;
    case SQ_DISTOPT_NATS_CACERT:
    case SQ_DISTOPT_NATS_CERT:
    case SQ_DISTOPT_NATS_KEY:
        if (!arg[0])
            return sq_flag_fail(err, len, "%s: '' is not a file", flag);
        *(opt == SQ_DISTOPT_NATS_CACERT ? &d->nats_cacert
          : opt == SQ_DISTOPT_NATS_CERT ? &d->nats_cert
                                        : &d->nats_key) = arg;
        return 1;
    case SQ_DISTOPT_NATS_INSECURE:
        d->nats_insecure = true;
        return 1;
    case SQ_DISTOPT_NATS_TLS_FIRST:
        d->nats_tls_first = true;
        return 1;
    case SQ_DISTOPT_SEGMENTS: {
        struct sq_rat pt[SQ_SEG_MAX_PARTS + 1];
        uint32_t n;
        const char *why;
        if (sq_seg_parse_sequence(arg, pt, SQ_SEG_MAX_PARTS + 1, &n, &why) < 0)
            return sq_flag_fail(err, len, "%s: '%s': %s", flag, arg, why);
        d->segments = arg;
        return 1;
    }
    default:
        return 0;
    }
}

/* The first NATS TLS flag given, or NULL. */
static const char *tls_flag(const struct sq_distopts *d)
{
    return d->nats_cacert      ? "--nats-cacert"
           : d->nats_cert      ? "--nats-cert"
           : d->nats_key       ? "--nats-key"
           : d->nats_insecure  ? "--nats-insecure"
           : d->nats_tls_first ? "--nats-tls-first"
                               : NULL;
}

int sq_distopts_tls_check(const struct sq_distopts *d, char *err, size_t len)
{
    const char *f = tls_flag(d);
    if (!f)
        return 0;
    if (!d->nats || strncasecmp(d->nats, "tls://", 6) != 0)
        return sq_flag_fail(err, len, "%s is for NATS over TLS: a tls://HOST[:PORT] --nats URL", f);
    if (!d->nats_cert != !d->nats_key)
        return sq_flag_fail(err, len, "%s needs %s (a client certificate and its key)",
                            d->nats_cert ? "--nats-cert" : "--nats-key",
                            d->nats_cert ? "--nats-key" : "--nats-cert");
    return 0; /* the files are read at the connect (the agents parse these flags too, as part of
                 the job, where the controller's paths need not exist) */
}

struct sq_tls_client_opts sq_distopts_tls(const struct sq_distopts *d)
{
    return (struct sq_tls_client_opts){.insecure = d->nats_insecure,
                                       .cacert = d->nats_cacert,
                                       .cert = d->nats_cert,
                                       .key = d->nats_key};
}

int sq_distopts_check(const struct sq_distopts *d, char *err, size_t len)
{
    if (d->agents && d->control)
        return sq_flag_fail(err, len,
                            "--control applies to a run on this machine, not on agents (--agents)");
    if (d->agents && !d->nats)
        return sq_flag_fail(err, len, "--agents needs --nats URL (the agents' NATS server)");
    if (!d->agents && (d->nats || d->agent_wait_ns || d->tolerate_loss || d->prefix ||
                       d->segments || d->nats_outage_ns || tls_flag(d))) {
        const char *f = d->nats             ? "--nats"
                        : d->agent_wait_ns  ? "--agent-wait"
                        : d->tolerate_loss  ? "--tolerate-agent-loss"
                        : d->prefix         ? "--subject-prefix"
                        : d->nats_outage_ns ? "--nats-outage"
                        : d->segments       ? "--segments"
                                            : tls_flag(d);
        return sq_flag_fail(err, len, "%s applies to a run on agents (--agents N)", f);
    }
    int rc = sq_distopts_tls_check(d, err, len);
    if (rc < 0)
        return rc;
    if (d->segments) {
        struct sq_rat pt[SQ_SEG_MAX_PARTS + 1];
        uint32_t n = 0;
        const char *why;
        if (sq_seg_parse_sequence(d->segments, pt, SQ_SEG_MAX_PARTS + 1, &n, &why) == 0 &&
            n - 1 != d->agents)
            return sq_flag_fail(err, len, "--segments: '%s' has %u segments for %llu agents",
                                d->segments, n - 1, (unsigned long long)d->agents);
        struct sq_seg s;
        if (sq_seg_init(&s, pt, n, 0, &why) < 0)
            return sq_flag_fail(err, len, "--segments: '%s': %s", d->segments, why);
        sq_seg_dispose(&s);
    }
    return 0;
}
