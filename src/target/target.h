/* target/target.h - `squall target`: the built-in test server's endpoints and counters.
 *
 * Endpoints (docs/target.md): /fast, /ok, /bytes/N, /delay/MS, /status/CODE, /echo,
 * /json/N, /sse, POST /login, /items, /cookie/set, /cookie/echo, /ws (a WebSocket echo),
 * POST /webhook, GET /stats, POST /stats/reset; anything else is 404. Each worker counts into its
 * own shard (relaxed atomic stores by the owner only); /stats sums the shards with relaxed loads
 * and subtracts a baseline that /stats/reset stores. No lock and no shared cache line per request.
 *
 * Arrivals: each worker also appends the arrival time of every request it counts (but /stats
 * and /stats/reset) to its own ring (a relaxed store and a release store of its count); /stats
 * copies every worker's times since the last reset, merges them into one time order and reports
 * the gaps between consecutive arrivals (sq_target_gaps). A full window drops and counts.
 *
 * Stall (optional): once every period, counted from the start, every response (but /stats and
 * /stats/reset) that would leave during [k * period, k * period + stall) leaves at the window's
 * end instead, through the server's "answer later" timer.
 */
#ifndef SQ_TARGET_TARGET_H
#define SQ_TARGET_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/decode.h"

#define SQ_TARGET_MAX_BYTES     (64ULL * 1024 * 1024) /* /bytes/N: N at most 64 MiB */
#define SQ_TARGET_MAX_DELAY_MS  60000ULL              /* /delay/MS: at most 60 s */
#define SQ_TARGET_MAX_REDIRECTS 100ULL                /* /redirect/N: a chain of at most 100 */
#define SQ_TARGET_ARRIVALS_CAP  (4u << 20) /* arrival times kept per worker per window (32 MiB) */
#define SQ_TARGET_MAX_STALL_NS  (3600LL * 1000 * 1000 * 1000) /* a stall lasts at most 1 h */
#define SQ_TARGET_MAX_JSON      (16ULL * 1024 * 1024)         /* /json/N: 2 <= N <= 16 MiB */
#define SQ_TARGET_MAX_EVENTS    1000000ULL                    /* /sse?events=N */
#define SQ_TARGET_MAX_INTERVAL  60000ULL                      /* /sse?interval=MS */

struct sq_target; /* opaque; sq_target_start creates it */
struct sq_tls_server;

struct sq_target_config {
    const char *host; /* NULL: 127.0.0.1 */
    uint16_t port;    /* 0: any free port */
    /* Listen on this Unix socket path instead (mode 0600; an existing file that is not a stale
     * socket is refused: server/server.h). NULL: host:port. */
    const char *unix_path;
    int threads; /* >= 1 */
    /* Both > 0 (stall_ns < stall_period_ns, stall_ns <= SQ_TARGET_MAX_STALL_NS): hold responses
     * for stall_ns once every stall_period_ns. Both 0: no stall. Anything else: -EINVAL. */
    int64_t stall_ns;
    int64_t stall_period_ns;
    /* Arrival times kept per worker between resets; 0: SQ_TARGET_ARRIVALS_CAP. Rounded up to a
     * power of two. Address space is reserved up front; memory is touched as it fills. */
    size_t arrivals_cap;
    /* Optional: serve HTTPS (borrowed; must outlive the target). NULL: plain HTTP. */
    struct sq_tls_server *tls;
    /* The server's limits (sq_server_config): idle, header and request timeouts (0: none), the
     * minimum body rate in bytes/s (0: none), the most connections open at once (0: no cap).
     * `squall target` defaults to 60 s, 10 s, 60 s, 1024 bytes/s, none. */
    int64_t idle_timeout_ns;
    int64_t header_timeout_ns;
    int64_t request_timeout_ns;
    uint32_t min_body_rate;
    uint32_t max_conns;
    /* POST /oauth/token accepts only this client, "ID:SECRET" (NULL: any id with a secret). */
    const char *oauth_client;
    /* Serve HTTP/3 too, on UDP at the same port number (target/h3srv.h), with this certificate
     * and key (PEM text, borrowed for the call); TCP responses then carry Alt-Svc. Needs tls
     * and no unix_path (-EINVAL); -ENOTSUP (*why set) in a build without HTTP/3. */
    bool http3;
    const char *h3_cert_pem, *h3_key_pem;
};

/* Binds and starts the workers. Returns 0, -errno, -SQ_ERESOLVE (*why set) or -EINVAL. */
SQ_MUST_CHECK int sq_target_start(const struct sq_target_config *cfg, struct sq_target **out,
                                  const char **why);
uint16_t sq_target_port(const struct sq_target *t);
/* Asks the workers to close every connection and exit. Async-signal-safe; idempotent. */
void sq_target_stop(struct sq_target *t);
/* Waits until every worker has exited (after sq_target_stop). */
void sq_target_wait(struct sq_target *t);
/* Stops, waits and frees. NULL is a no-op. */
void sq_target_free(struct sq_target *t);

/* ---- counters and routing (exposed for tests) ---- */

/* The endpoints /stats reports, in its order. */
#define SQ_TARGET_ENDPOINTS(X)                                                                     \
    X(FAST, "fast")                                                                                \
    X(OK, "ok")                                                                                    \
    X(BYTES, "bytes")                                                                              \
    X(DELAY, "delay")                                                                              \
    X(STATUS, "status")                                                                            \
    X(ECHO, "echo")                                                                                \
    X(JSON, "json")                                                                                \
    X(SSE, "sse")                                                                                  \
    X(LOGIN, "login")                                                                              \
    X(ITEMS, "items")                                                                              \
    X(OAUTH, "oauth")                                                                              \
    X(COOKIE, "cookie")                                                                            \
    X(REDIRECT, "redirect")                                                                        \
    X(STATS, "stats")                                                                              \
    X(WS, "ws")                                                                                    \
    X(WEBHOOK, "webhook")                                                                          \
    X(NOT_FOUND, "not_found")

enum sq_target_ep {
#define SQ_TARGET_EP_ENUM(name, str) SQ_TARGET_EP_##name,
    SQ_TARGET_ENDPOINTS(SQ_TARGET_EP_ENUM)
#undef SQ_TARGET_EP_ENUM
        SQ_TARGET_EP__COUNT,
    SQ_TARGET_EP_STATS_RESET = SQ_TARGET_EP__COUNT, /* routed apart, counted as STATS */
};

/* The JSON key of an endpoint ("fast", ...). */
const char *sq_target_ep_name(enum sq_target_ep ep);

/* A routed request: which endpoint, its numeric argument, and whether the argument is valid
 * (false: the endpoint answers 400). COOKIE's argument: 0 /cookie/set, 1 /cookie/echo. */
struct sq_target_route {
    enum sq_target_ep ep;
    uint64_t arg;
    bool bad_arg;
};

/* Routes a request by method and request-target (origin or absolute form; the query string
 * is ignored). */
struct sq_target_route sq_target_route(const char *method, size_t method_len, const char *path,
                                       size_t path_len);

/* Parses s[0, n) as a decimal in [0, max] (no sign, no leading '+', at most 19 digits).
 * Returns false on anything else. */
bool sq_target_parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out);

/* Writes s[0, n) as a JSON string body (no quotes) into out (capacity cap), escaping '"', '\\'
 * and control bytes; valid UTF-8 passes through, any other byte becomes \u00XX. Returns the
 * length needed; out is complete only when that is <= cap. At most 6 * n. */
size_t sq_target_json_escape(char *out, size_t cap, const char *s, size_t n);

/* ---- arrival gaps (the pure part of /stats' "arrivals"; exposed for tests) ---- */

/* One run of arrival times, CLOCK_MONOTONIC ns (one worker's, in the target). */
struct sq_target_run {
    int64_t *t;
    size_t n;
};

struct sq_target_gaps {
    uint64_t count; /* arrivals in all runs */
    /* Gaps between consecutive arrivals in the merged time order (count - 1 of them), in µs.
     * Percentiles come from an HDR histogram of the gaps in ns (lowest 1, highest 60 s, 3
     * significant digits: within 0.1%; a longer gap is recorded as 60 s); max and mean are
     * exact. All 0 when count < 2. */
    double p50_us, p90_us, p99_us, max_us, mean_us;
};

/* Puts the arrivals of all runs into one time order - each run is sorted in place first unless
 * it already is, then the runs are merged - and summarises the gaps into *out. Returns 0 or
 * -ENOMEM (*out untouched). */
SQ_MUST_CHECK int sq_target_gaps(struct sq_target_run *runs, size_t nruns,
                                 struct sq_target_gaps *out);

/* Counter shards: one per worker plus a baseline. Each value reported is sum - baseline
 * (never below 0: a reset that races a read shows 0, not a wrapped number). A shard holds the
 * endpoints and the three auth counts (SQ_TARGET_NSHARD slots); the last SQ_TARGET_NEXTRA are
 * the server's (sq_server_counts), passed in as extra[]. */
#define SQ_TARGET_NSHARD (SQ_TARGET_C_WEBHOOK_BYTES + 1)
enum {
    SQ_TARGET_C_LOGINS = SQ_TARGET_EP__COUNT, /* tokens issued by POST /login */
    SQ_TARGET_C_ITEMS_OK,                     /* /items with a valid token */
    SQ_TARGET_C_ITEMS_UNAUTH,                 /* /items answered 401 */
    SQ_TARGET_C_OAUTH_TOKENS,                 /* tokens issued by POST /oauth/token */
    SQ_TARGET_C_OAUTH_REFUSED,                /* ... answered 503 on purpose (?fail=N) */
    SQ_TARGET_C_ITEMS_EXPIRED,                /* /items 401s for an expired OAuth2 token */
    /* /ws (target/wsep.c): connections upgraded and ended, messages and payload bytes each way,
     * pings of the server (?ping=1) and pongs back, pings of the client, close frames received,
     * connections ended for a protocol error */
    SQ_TARGET_C_WS_UPGRADES,
    SQ_TARGET_C_WS_ENDED,
    SQ_TARGET_C_WS_MSGS_IN,
    SQ_TARGET_C_WS_MSGS_OUT,
    SQ_TARGET_C_WS_BYTES_IN,
    SQ_TARGET_C_WS_BYTES_OUT,
    SQ_TARGET_C_WS_PINGS_OUT,
    SQ_TARGET_C_WS_PONGS_IN,
    SQ_TARGET_C_WS_PINGS_IN,
    SQ_TARGET_C_WS_CLOSES_IN,
    SQ_TARGET_C_WS_ERRORS,
    /* POST /webhook: events accepted (202), of which carried a {{$stamp}} token, body bytes */
    SQ_TARGET_C_WEBHOOK_EVENTS,
    SQ_TARGET_C_WEBHOOK_STAMPED,
    SQ_TARGET_C_WEBHOOK_BYTES,
};
#define SQ_TARGET_NEXTRA    9
#define SQ_TARGET_NCOUNTERS (SQ_TARGET_NSHARD + SQ_TARGET_NEXTRA) /* shard slots, then these: */
enum {
    SQ_TARGET_C_ACCEPTED = SQ_TARGET_NSHARD,
    SQ_TARGET_C_400,
    SQ_TARGET_C_413,
    SQ_TARGET_C_431,
    SQ_TARGET_C_SMUGGLING, /* of the 400s */
    SQ_TARGET_C_REFUSED,   /* connections over max_conns */
    SQ_TARGET_C_IDLE_TO,   /* connections closed by the idle timeout */
    SQ_TARGET_C_HEADER_TO, /* ... by the header timeout */
    SQ_TARGET_C_BODY_TO,   /* ... by the request timeout or the minimum body rate (a body) */
};

struct sq_target_counters; /* opaque */

/* nshards shards, each on its own cache lines. Returns NULL when out of memory. */
struct sq_target_counters *sq_target_counters_new(int nshards);
void sq_target_counters_free(struct sq_target_counters *c);
/* Adds 1 to counter i of shard s. Only the thread that owns shard s may call it. */
void sq_target_counters_bump(struct sq_target_counters *c, int s, int i);
/* Adds n to counter i of shard s (same rule). */
void sq_target_counters_add(struct sq_target_counters *c, int s, int i, uint64_t n);
/* Sums counter i (< SQ_TARGET_NSHARD; else 0) over all shards (relaxed loads; any thread). */
uint64_t sq_target_counters_sum(const struct sq_target_counters *c, int i);
/* Fills out[SQ_TARGET_NCOUNTERS] with sums less the baseline. extra[SQ_TARGET_NEXTRA] are
 * counts kept elsewhere (the server's, in the order of the slots above), taken as those slots'
 * sums. */
void sq_target_counters_read(const struct sq_target_counters *c,
                             const uint64_t extra[SQ_TARGET_NEXTRA], uint64_t *out);
/* Stores the current sums (with extra[]) as the baseline. Any thread. */
void sq_target_counters_reset(struct sq_target_counters *c, const uint64_t extra[SQ_TARGET_NEXTRA]);

/* ---- /json, /login, /items (the pure parts; exposed for tests) ---- */

/* The coding /json answers with for an Accept-Encoding value (accept[0, len); NULL/0: no
 * header). Among gzip (x-gzip), deflate, br and zstd, the one with the highest q-value > 0 wins
 * (a coding not listed takes the q of "*", if any; a malformed q drops that element); ties go to
 * zstd, then br, gzip, deflate. SQ_CODING_NONE when none is acceptable. */
enum sq_coding sq_target_pick_coding(const char *accept, size_t len);

/* Writes exactly n (>= 2) bytes of valid JSON into out: an array of small objects
 * {"id":I,"name":"item-I","ok":B} padded with spaces before the closing bracket. */
void sq_target_json_fill(char *out, size_t n);

#define SQ_TARGET_TOKEN_LEN 32 /* hex(nonce) then hex(tag), 16 digits each */

/* SipHash-2-4 of the 8-byte little-endian message m under key[2] (as written from the
 * SipHash paper; used as a keyed checksum so that any worker can verify a token without shared
 * state). Not a security boundary: the target is a test server. */
uint64_t sq_target_siphash(const uint64_t key[2], uint64_t m);

/* Writes the token for nonce (SQ_TARGET_TOKEN_LEN lowercase hex digits, no NUL). */
void sq_target_token_make(const uint64_t key[2], uint64_t nonce, char *out);

/* True when tok[0, len) is a token made under key (hex digits of either case). */
bool sq_target_token_check(const uint64_t key[2], const char *tok, size_t len);

#define SQ_TARGET_OAUTH_TOKEN_LEN 48 /* hex(nonce), hex(expiry ms), hex(tag) */

/* Writes the OAuth2 access token for nonce, valid until expiry_ms (CLOCK_MONOTONIC ms). */
void sq_target_oauth_make(const uint64_t key[2], uint64_t nonce, uint64_t expiry_ms, char *out);
/* 1: tok[0, len) is an OAuth2 token made under key, valid at now_ms; 0: made under key but
 * expired; -1: not one. */
int sq_target_oauth_check(const uint64_t key[2], const char *tok, size_t len, uint64_t now_ms);

#endif
