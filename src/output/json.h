/* output/json.h - the result document of a run (schema squall.result/1, docs/json-schema.md).
 *
 * Every end-of-run output is rendered from this one document: the JSON file, the terminal
 * summary (output/summary.h) and the HTML report (output/html.h). So the summary printed after a
 * run and the one `squall report FILE` reprints cannot disagree. Plan runs add their sections
 * with output/plan_json.h.
 */
#ifndef SQ_OUTPUT_JSON_H
#define SQ_OUTPUT_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "result/result.h"

struct sq_exec;

/* The JSON schema this build writes; docs/json-schema.md describes it. */
#define SQ_RESULT_SCHEMA "squall.result/1"

/* A bus run (nats://, mqtt://) as its document's `nats` / `mqtt` block says it: what the face
 * asked of the broker, in plain values (the face reads them from its configuration). */
struct sq_report_bus {
    bool mqtt;                 /* the block is `mqtt`; else `nats` */
    const char *mode;          /* "publish", "jetstream", "request", "round-trip" */
    const char *subject;       /* the NATS subject or the MQTT topic */
    uint32_t window;           /* messages a connection has out at once */
    const char *latency_means; /* what a message's latency measures, in words */
    /* MQTT only */
    int qos;
    const char *version; /* "5.0" or "3.1.1" */
    bool retain;
    bool round_trip;       /* the block counts deliveries (delivered, foreign) */
    bool idle;             /* --idle: connect and hold, no publish */
    const char *websocket; /* mqtt+ws(s)://: the WebSocket path MQTT rides; NULL: TCP */
};

/* What was asked for, as the user said it. */
struct sq_report_info {
    const char *url;
    const char *method;
    const char *target_addr;    /* the first resolved address, "127.0.0.1:8080" */
    const struct sq_exec *exec; /* what load was asked for */
    uint32_t threads;
    int64_t timeout_ns, connect_timeout_ns;
    size_t request_bytes;            /* size of one serialised request */
    const char *accept_encoding;     /* what the requests offered (NULL: --no-compression) */
    const char *protocol;            /* "http/1.1", "h2c", "h2" or "h3"...; NULL: not said */
    uint32_t streams;                /* HTTP/2, HTTP/3: streams per connection; 0: not them */
    const struct sq_report_bus *bus; /* nats:// and mqtt:// runs; NULL: HTTP */
    const char *name;                /* --name, a plan's name:; NULL: none */
    /* --percentiles: the latency percentiles "latency.percentiles" lists; NULL: the default
     * 50, 90, 95, 99, 99.9 */
    const double *percentiles;
    size_t npercentiles;
    /* The run id as its stamps write it (engine/run.h: sq_stamp_run_text), for the `stamps`
     * block of a run that stamped events; NULL: the block gives it as null. */
    const char *stamp_run;
    /* The local addresses the connections were bound to, round-robin (--source-addrs, or
     * 127.0.0.1+ spread by itself on loopback: source_auto): config.source_addrs; none: the
     * kernel chose. connect_rate: --connect-rate (config.connect_rate_per_s), 0: none. */
    char *const *source_addrs;
    size_t nsource_addrs;
    bool source_auto;
    double connect_rate;
    /* The run's HTTP proxy (face/netopts.h): proxy_url NULL or "" none, else config.proxy {url
     * (never its credentials), from (--proxy, HTTPS_PROXY...), mode (connect, absolute-form),
     * auth (whether credentials were sent)}. */
    const char *proxy_url, *proxy_from, *proxy_mode;
    bool proxy_auth;
};

/* "2024-05-01T10:00:00.123+02:00": wall-clock ns since the epoch as ISO 8601 in the local time
 * zone, with milliseconds and the zone's offset. */
const char *sq_report_iso8601(int64_t wall_ns, char *buf, size_t size);

/* Sets what only the command line knows in doc's "run" block: the command as typed (argv joined
 * with spaces, each argument quoted for a POSIX shell when it needs to be). With redact, the
 * value of a -H / --header that carries a credential, and the password of a URL, are redacted
 * (base/redact.h). */
void sq_report_set_command(json_t *doc, int argc, char **argv, bool redact);
/* obj's string at key with the secret of its URL's userinfo redacted (base/redact.h), when it
 * has one: "nats://user:[redacted]@host/subject". */
void sq_report_redact_url(json_t *obj, const char *key);

/* Builds the result document (owned by the caller: json_decref it), or NULL when out of memory. */
json_t *sq_report_json_doc(const struct sq_report_info *info, const struct sq_result *r);

/* What error kind k means, or its first message when squall keeps one (connect's errno, the
 * first TLS error): the document's error_messages. buf (320 bytes is enough) may hold it. */
const char *sq_report_error_text(const struct sq_result *r, enum sq_errk k, int64_t timeout_ns,
                                 char *buf, size_t len);

/* Why a run that did not succeed (result/verdict.h sq_result_succeeded) failed, in one line for
 * "squall: no request succeeded: LINE" and the daemon's reason: the failed units and the error
 * kinds by count, largest first (three named, each with what it means), e.g. "12,408 failed:
 * timeout 12,408 (no complete response within the 1s timeout)"; the reason of a run that gave
 * up first ("no connection could be made to ..."); "tls: REASON" when every handshake failed.
 * timeout_ns: the run's request timeout. Returns buf. */
const char *sq_report_why_failed(const struct sq_result *r, int64_t timeout_ns, char *buf,
                                 size_t len);

/* One entry of the document's per-second "series" (owned by the caller), or NULL when out of
 * memory. client: carry the "client" block (squall's own cost; the document does when its
 * result's client figures are valid), open: the run is open-loop (the block's behind_ms). The
 * daemon's live events carry the same shape. */
json_t *sq_report_json_second(const struct sq_second *e, bool client, bool open);

/* A sampled-exchange class's name (result/result.h): "1xx".."5xx", "other", or the error
 * kind's name. */
const char *sq_report_sample_class(uint32_t cls);
/* One sampled exchange as an entry of "sampled_exchanges" writes it (t_s, status, error,
 * timings, request, response), or NULL when out of memory. */
struct sq_xsample;
json_t *sq_report_json_sample(const struct sq_xsample *x);

/* The document of `squall sink` alone: schema, version, mode "sink", its duration, the
 * environment and the sink block (taken: the document owns it). NULL when out of memory. */
json_t *sq_report_sink_doc(json_t *sink, double duration_s);

/* Writes the document as indented JSON, keys in document order. Returns 0 or -EIO. */
SQ_MUST_CHECK int sq_report_json_write(FILE *f, const json_t *doc);

#endif
