/* cli/common.c - see common.h. */
#include "cli/common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "face/flags.h"
#include "face/netopts.h"
#include "result/verdict.h"
#include "output/doc.h"
#include "output/html.h"
#include "output/json.h"
#include "output/junit.h"
#include "output/progress.h"
#include "output/series.h"
#include "output/summary.h"

/* Prints msg with C escapes for control bytes, so it stays on one line whatever the user typed. */
static void put_line(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\r')
            fputs("\\r", stderr);
        else if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p == '\t')
            fputs("\\t", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
}

static void vline(const char *face, const char *hint, const char *fmt, va_list ap)
{
    char msg[1024];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    fprintf(stderr, "%s: ", face);
    put_line(msg);
    if (n >= (int)sizeof(msg))
        fputs("...", stderr); /* an overlong value is cut */
    if (hint)
        fprintf(stderr, " (see %s --help)", hint);
    fputc('\n', stderr);
}

int sq_cli_usage_error(const char *face, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(face, face, fmt, ap);
    va_end(ap);
    return SQ_EXIT_USAGE;
}

void sq_cli_error(const char *face, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(face, NULL, fmt, ap);
    va_end(ap);
}

int sq_cli_flag_refused(const char *face, const struct option *longs, int opt, const char *flag)
{
    char err[256];
    sq_flag_refused(longs, opt, flag, err, sizeof(err));
    return sq_cli_usage_error(face, "%s", err);
}

int sq_cli_getopt(int argc, char **argv, const char *shorts, const struct option *longs,
                  sq_cli_take_fn take, void *ud)
{
    opterr = 0;
    optind = 0;
    int opt, li = -1, rc;
    while ((opt = getopt_long(argc, argv, shorts, longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, opt, argv, name, sizeof(name));
        if ((rc = take(ud, longs, opt, flag)) != 0)
            return rc;
    }
    return 0;
}

int sq_cli_prep_error(const char *face, int rc, const char *msg)
{
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(face, "%s", msg);
    fprintf(stderr, "squall: %s\n", msg);
    return rc == -SQ_EPARSE ? SQ_EXIT_USAGE : SQ_EXIT_FAIL;
}

int sq_cli_tls_error(const char *face, const char *err)
{
    char msg[SQ_PREP_ERRLEN];
    sq_netopts_tls_message(err, msg, sizeof(msg));
    return sq_cli_usage_error(face, "%s", msg);
}

char **sq_cli_argv_copy(int argc, char **argv)
{
    char **v = calloc((size_t)argc + 1, sizeof(*v));
    if (v)
        memcpy(v, argv, (size_t)argc * sizeof(*v));
    return v;
}

/* ---- signals ---- */

static volatile int stop_flag;
static volatile sig_atomic_t sig_first, sig_forced;
static volatile sig_atomic_t sig_t0_s, sig_t0_ns; /* when the first one came (CLOCK_MONOTONIC) */

/* Async-signal-safe: clock_gettime is (POSIX.1-2008), and the handler only stores. */
static void on_signal(int sig)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!sig_first) {
        sig_t0_s = (sig_atomic_t)now.tv_sec;
        sig_t0_ns = (sig_atomic_t)now.tv_nsec;
        sig_first = sig;
        if (stop_flag < SQ_STOP_GRACEFUL)
            stop_flag = SQ_STOP_GRACEFUL;
        return;
    }
    int64_t since = ((int64_t)now.tv_sec - sig_t0_s) * 1000000000LL + (now.tv_nsec - sig_t0_ns);
    if (since >= 1000000000LL) {
        /* a second signal, a second or more after the first: stop now (outputs still written) */
        sig_forced = 1;
        stop_flag = SQ_STOP_NOW;
    }
}

volatile int *sq_cli_signals_begin(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    signal(SIGPIPE, SIG_IGN);
    stop_flag = 0;
    sig_first = sig_forced = 0;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &stop_flag;
}

volatile int *sq_cli_signals_again(void)
{
    stop_flag = 0; /* a signal seen stays seen (sq_cli_signal_seen); the next one stops now */
    if (sig_first) {
        sig_t0_s = 0;
        sig_t0_ns = 0;
    }
    return &stop_flag;
}

void sq_cli_signals_end(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

void sq_cli_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void sq_cli_listening(const char *what, const char *scheme, const char *host, unsigned port,
                      const char *tail)
{
    bool v6 = strchr(host, ':') != NULL;
    printf("squall %s listening on %s://%s%s%s:%u%s\n", what, scheme, v6 ? "[" : "", host,
           v6 ? "]" : "", port, tail);
    fflush(stdout);
}

int sq_cli_signal_seen(bool *forced)
{
    *forced = sig_forced != 0;
    return sig_first;
}

static const char *sig_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void sq_cli_signal_mark(struct sq_result *res, int sig, bool forced)
{
    res->aborted = true;
    if (forced)
        snprintf(res->abort_reason, sizeof(res->abort_reason),
                 "stopped by %s, then at once by a second signal", sig_name(sig));
    else
        snprintf(res->abort_reason, sizeof(res->abort_reason),
                 "stopped by %s (what was in flight could finish for the graceful stop)",
                 sig_name(sig));
}

void sq_cli_signal_doc(json_t *doc, int sig, bool forced)
{
    json_object_set_new(doc, "signal",
                        json_pack("{s:s, s:b}", "name", sig_name(sig), "forced", forced));
}

void sq_cli_progress_init(struct sq_progress *p, bool open, double length_s)
{
    bool tty = isatty(STDERR_FILENO);
    *p = (struct sq_progress){.f = stderr,
                              .tty = tty,
                              .color = tty && sq_cli_color(stderr),
                              .every_s = 10,
                              .open = open,
                              .length_s = length_s};
}

bool sq_cli_color(FILE *f)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(fileno(f)) && !(nc && nc[0]);
}

/* ---- output files, written atomically ---- */

/* The directory of path and its last component, split (dir "." when there is none). */
static int split_path(const char *path, char **dir, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    return *dir ? 0 : -ENOMEM;
}

/* Where the file lands: path, or the target of the link path is. Sets *direct when it is not a
 * regular file (a device, a FIFO): that is written in place. */
static char *resolve(const char *path, bool *direct, int *err)
{
    struct stat st;
    *direct = false;
    *err = 0;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (real)
            return real;
        /* a dangling link: it is replaced */
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            *err = EISDIR;
            return NULL;
        }
        if (!S_ISREG(st.st_mode))
            *direct = true;
    }
    char *p = strdup(path);
    if (!p)
        *err = ENOMEM;
    return p;
}

/* Creates the temporary file beside path; returns its fd and name, or -errno. */
static int make_temp(const char *path, char **tmp)
{
    char *dir;
    const char *base;
    if (split_path(path, &dir, &base) < 0)
        return -ENOMEM;
    if (asprintf(tmp, "%s/.%s.XXXXXX", dir, base) < 0) {
        free(dir);
        *tmp = NULL;
        return -ENOMEM;
    }
    free(dir);
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        return -e;
    }
    /* mkstemp makes it 0600; a result file gets what fopen would have given it */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    return fd;
}

static int file_refused(const char *face, const char *flag, const char *path, int err)
{
    if (err == EISDIR)
        return sq_cli_usage_error(face, "%s: cannot write '%s': it is a directory", flag, path);
    return sq_cli_usage_error(face, "%s: cannot write '%s': %s", flag, path, strerror(err));
}

int sq_cli_file_check(const char *face, const char *flag, const char *path)
{
    if (!path[0])
        return sq_cli_usage_error(face, "%s: '' is not a file name", flag);
    if (strcmp(path, "-") == 0)
        return 0;
    bool direct;
    int err;
    char *where = resolve(path, &direct, &err);
    if (!where)
        return file_refused(face, flag, path, err);
    int rc = 0;
    if (direct) {
        if (access(where, W_OK) < 0)
            rc = file_refused(face, flag, path, errno);
    } else {
        char *tmp = NULL;
        int fd = make_temp(where, &tmp);
        if (fd < 0) {
            rc = file_refused(face, flag, path, -fd);
        } else {
            close(fd);
            unlink(tmp);
            free(tmp);
        }
    }
    free(where);
    return rc;
}

int sq_cli_file_open(const char *face, const char *flag, const char *path, struct sq_cli_file *out)
{
    *out = (struct sq_cli_file){.flag = flag};
    if (!path[0])
        return sq_cli_usage_error(face, "%s: '' is not a file name", flag);
    if (strcmp(path, "-") == 0) {
        out->f = stdout;
        return 0;
    }
    bool direct;
    int err;
    out->path = resolve(path, &direct, &err);
    if (!out->path)
        return file_refused(face, flag, path, err);
    if (direct) {
        out->f = fopen(out->path, "w");
        if (!out->f) {
            int e = errno;
            free(out->path);
            out->path = NULL;
            return file_refused(face, flag, path, e);
        }
        return 0;
    }
    int fd = make_temp(out->path, &out->tmp);
    if (fd >= 0 && !(out->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(out->tmp);
        fd = -e;
    }
    if (fd < 0) {
        free(out->path);
        free(out->tmp);
        *out = (struct sq_cli_file){.flag = flag};
        return file_refused(face, flag, path, -fd);
    }
    return 0;
}

int sq_cli_file_stream(const char *face, const char *flag, const char *path,
                       struct sq_cli_file *out)
{
    *out = (struct sq_cli_file){.flag = flag};
    if (!path[0])
        return sq_cli_usage_error(face, "%s: '' is not a file name", flag);
    if (strcmp(path, "-") == 0) {
        out->f = stdout;
        return 0;
    }
    /* O_EXCL first, to know whether the file is squall's own (removed again when the run
     * measures nothing); an existing one is truncated, as fopen "w" would. A link is followed
     * (its target written), as the atomic writer does. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    bool made = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0)
        return file_refused(face, flag, path, errno);
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) { /* O_WRONLY refuses one; to be sure */
        close(fd);
        return file_refused(face, flag, path, EISDIR);
    }
    if (!(out->f = fdopen(fd, "w")) || !(out->path = strdup(path))) {
        int e = errno ? errno : ENOMEM;
        if (out->f)
            fclose(out->f);
        else
            close(fd);
        if (made)
            unlink(path);
        *out = (struct sq_cli_file){.flag = flag};
        return file_refused(face, flag, path, e);
    }
    out->made = made;
    return 0;
}

int sq_cli_file_commit(struct sq_cli_file *o)
{
    if (!o->f)
        return 0;
    int rc = 0;
    if (o->f == stdout) {
        rc = fflush(stdout) == 0 ? 0 : -errno;
    } else {
        if (fflush(o->f) != 0 || ferror(o->f))
            rc = -(errno ? errno : EIO);
        if (rc == 0 && o->tmp && fsync(fileno(o->f)) < 0 && errno != EINVAL)
            rc = -errno;
        if (fclose(o->f) != 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && o->tmp && rename(o->tmp, o->path) < 0)
            rc = -errno;
        if (rc < 0 && o->tmp)
            unlink(o->tmp);
    }
    if (rc < 0)
        fprintf(stderr, "squall: %s: writing '%s': %s\n", o->flag, o->path ? o->path : "-",
                strerror(-rc));
    o->f = NULL;
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    return rc;
}

void sq_cli_file_discard(struct sq_cli_file *o)
{
    if (o->f && o->f != stdout) {
        fclose(o->f);
        if (o->tmp)
            unlink(o->tmp);
        else if (o->made)
            unlink(o->path); /* created by sq_cli_file_stream, holding nothing measured */
    }
    o->f = NULL;
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
}

#define NDJSON_BUF (1 << 20)

int sq_cli_series_open(struct sq_cli_series *s, const char *face, const char *csv, const char *hdr,
                       const char *ndjson, double sample, struct sq_run_config *cfg)
{
    int rc;
    s->face = face;
    if (csv && (rc = sq_cli_file_stream(face, "--out csv", csv, &s->csvf)) != 0)
        return rc;
    if (hdr && (rc = sq_cli_file_stream(face, "--out hdr", hdr, &s->hdrf)) != 0)
        return rc;
    s->csv = s->csvf.f;
    s->hdr = s->hdrf.f;
    if (ndjson) {
        if ((rc = sq_cli_file_stream(face, "--out ndjson", ndjson, &s->ndf)) != 0)
            return rc;
        s->nd.f = s->ndf.f;
        /* a buffer of ours: given NULL, glibc's setvbuf ignores the size and keeps st_blksize
         * (4 KiB: a write(2) every few dozen lines); without one, that is what we get. Not for
         * standard output, which outlives the buffer (commit flushes it, never closes it). */
        if (s->nd.f != stdout && (s->_ndbuf = malloc(NDJSON_BUF)) != NULL)
            setvbuf(s->nd.f, s->_ndbuf, _IOFBF, NDJSON_BUF);
        if (!s->nd.scenario)
            s->nd.scenario = "default";
        cfg->on_samples = sq_ndjson_write;
        cfg->samples_ud = &s->nd;
        cfg->sample_fraction = sample > 0 ? sample : 1;
    }
    if (s->csv) {
        sq_csv_header(s->csv, s->metrics, s->nmetrics);
        fflush(s->csv);
    }
    if (s->hdr) {
        sq_hdrlog_header(s->hdr, sq_wall_s());
        fflush(s->hdr);
    }
    return 0;
}

void sq_cli_series_tick(struct sq_cli_series *s, const struct sq_second *e, const struct sq_hist *h)
{
    if (s->csv) {
        sq_csv_row(s->csv, e, s->metrics, s->nmetrics);
        fflush(s->csv); /* a reader tailing the file sees each second as it ends */
    }
    if (s->hdr && !s->hdr_failed && sq_hdrlog_line(s->hdr, e, h) < 0)
        s->hdr_failed = true;
    if (s->hdr)
        fflush(s->hdr);
    /* the writer thread fills nd.f's buffer; stdio locks the stream, so this flush from the
     * main thread takes turns with its fwrite, and what it wrote so far is out within a second */
    if (s->nd.f)
        fflush(s->nd.f);
}

void sq_cli_series_report(struct sq_cli_series *s, const struct sq_result *res)
{
    if (s->hdr_failed)
        fprintf(stderr, "squall: --out hdr: could not encode an interval\n");
    if (s->nd.f && (fflush(s->nd.f) != 0 || s->nd.failed))
        fprintf(stderr, "squall: --out ndjson: write failed: %s\n", strerror(errno));
    if (res->samples_lost)
        fprintf(stderr,
                "squall: --out ndjson: %llu requests not recorded (the writer fell "
                "behind; try --sample)\n",
                (unsigned long long)res->samples_lost);
}

void sq_cli_series_close(struct sq_cli_series *s, bool commit)
{
    struct sq_cli_file *all[] = {&s->csvf, &s->hdrf, &s->ndf};
    for (size_t i = 0; i < SQ_ARRAY_LEN(all); i++) {
        if (commit)
            sq_cli_file_commit(all[i]);
        else
            sq_cli_file_discard(all[i]);
    }
    s->csv = s->hdr = s->nd.f = NULL;
    free(s->_ndbuf); /* after its stream's fclose */
    s->_ndbuf = NULL;
    sq_ndjson_dispose(&s->nd);
}

int sq_cli_outputs_open(struct sq_cli_outputs *o)
{
    int rc = 0;
    if (o->html_path && (rc = sq_cli_file_check(o->face, "--html", o->html_path)) != 0)
        return rc;
    if (o->json_path && (rc = sq_cli_file_check(o->face, "--json", o->json_path)) != 0)
        return rc;
    if (o->junit_path && (rc = sq_cli_file_check(o->face, "--junit", o->junit_path)) != 0)
        return rc;
    return 0;
}

int sq_cli_render(const struct sq_cli_outputs *o, const json_t *doc)
{
    bool json_stdout = (o->json_path && strcmp(o->json_path, "-") == 0) ||
                       (o->junit_path && strcmp(o->junit_path, "-") == 0);
    FILE *tf = json_stdout ? stderr : stdout;
    int failed = 0;
    struct sq_summary_opts so = {.color = sq_cli_color(tf)};
    if (!o->quiet && sq_report_summary_opts(doc, tf, &so) < 0)
        fprintf(stderr, "squall: could not print the summary\n");
    struct sq_cli_file jf = {0}, hf = {0};
    if (o->json_path) {
        if (sq_cli_file_open(o->face, "--json", o->json_path, &jf) != 0) {
            failed = -1;
        } else if (sq_report_json_write(jf.f, doc) < 0) {
            fprintf(stderr, "squall: --json: write failed: %s\n", strerror(errno));
            sq_cli_file_discard(&jf);
            failed = -1;
        } else if (sq_cli_file_commit(&jf) < 0) {
            failed = -1;
        }
    }
    if (o->html_path) {
        if (sq_cli_file_open(o->face, "--html", o->html_path, &hf) != 0) {
            failed = -1;
        } else if (sq_report_html(doc, hf.f) < 0) {
            fprintf(stderr, "squall: --html: write failed: %s\n", strerror(errno));
            sq_cli_file_discard(&hf);
            failed = -1;
        } else if (sq_cli_file_commit(&hf) < 0) {
            failed = -1;
        }
    }
    if (o->junit_path) {
        struct sq_cli_file xf = {0};
        if (sq_cli_file_open(o->face, "--junit", o->junit_path, &xf) != 0) {
            failed = -1;
        } else if (sq_report_junit(doc, xf.f) < 0) {
            fprintf(stderr, "squall: --junit: write failed: %s\n", strerror(errno));
            sq_cli_file_discard(&xf);
            failed = -1;
        } else if (sq_cli_file_commit(&xf) < 0) {
            failed = -1;
        }
    }
    return failed;
}

/* ---- --verbose, --http-debug ---- */

#define CAPTURE_KEEP 64

struct kept {
    struct sq_exchange x; /* its pointers point into buf */
    uint32_t worker;
    char *buf;
};

struct capture_state {
    pthread_mutex_t mu;
    enum sq_capture_mode mode;
    uint8_t seen[(SQ_STATUS_CODES + SQ_ERRK_COUNT + 7) / 8];
    struct kept kept[CAPTURE_KEEP];
    size_t n;
    uint64_t more; /* exchanges past CAPTURE_KEEP, not kept */
};

/* The hook, on a worker thread: keeps a copy of the first of each kind across workers. */
static void on_exchange(void *ud, uint32_t worker, const struct sq_exchange *x)
{
    struct capture_state *st = ud;
    pthread_mutex_lock(&st->mu);
    size_t bit = x->error >= 0 ? SQ_STATUS_CODES + (size_t)x->error
                               : (x->status < SQ_STATUS_CODES ? x->status : 0);
    bool dup = st->mode == SQ_CAPTURE_FIRST_OF_KIND && (st->seen[bit / 8] & (1u << (bit % 8)));
    st->seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
    if (dup) {
        pthread_mutex_unlock(&st->mu);
        return;
    }
    if (st->n == CAPTURE_KEEP) {
        st->more++;
        pthread_mutex_unlock(&st->mu);
        return;
    }
    struct kept *k = &st->kept[st->n];
    k->buf = malloc(x->req_len + x->head_len + x->body_len + 1);
    if (k->buf) {
        k->worker = worker;
        k->x = *x;
        memcpy(k->buf, x->req, x->req_len);
        memcpy(k->buf + x->req_len, x->head, x->head_len);
        memcpy(k->buf + x->req_len + x->head_len, x->body, x->body_len);
        k->x.req = k->buf;
        k->x.head = k->buf + x->req_len;
        k->x.body = k->buf + x->req_len + x->head_len;
        st->n++;
    }
    pthread_mutex_unlock(&st->mu);
}

/* A result is a few KiB plus ~250 bytes per second of series; past this it is not one. */
#define MAX_RESULT_BYTES ((off_t)256 << 20)

static int bad_file(const char *face, const char *path, const char *problem)
{
    sq_cli_error(face, "%s: %s", path, problem);
    return SQ_EXIT_USAGE;
}

int sq_cli_read_result(const char *face, const char *path, json_t **out)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return bad_file(face, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fclose(f);
            return bad_file(face, path, "is a directory");
        }
        if (S_ISREG(st.st_mode) && st.st_size > MAX_RESULT_BYTES) {
            fclose(f);
            return bad_file(face, path, "too large for a squall result (over 256 MiB)");
        }
    }
    char why[JSON_ERROR_TEXT_LENGTH + 160];
    int rc = sq_report_doc_read(f, out, why, sizeof(why));
    if (!is_stdin)
        fclose(f);
    if (rc < 0)
        return bad_file(face, path, why);
    return SQ_EXIT_OK;
}

int sq_cli_capture_init(struct sq_cli_capture *c, enum sq_capture_mode mode)
{
    struct capture_state *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    pthread_mutex_init(&st->mu, NULL);
    st->mode = mode;
    c->_priv = st;
    c->cfg = (struct sq_capture){
        .mode = mode, .body_max = SQ_CAPTURE_BODY_MAX, .on_exchange = on_exchange, .ud = st};
    return 0;
}

void sq_cli_capture_dispose(struct sq_cli_capture *c)
{
    struct capture_state *st = c->_priv;
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->kept[i].buf);
    pthread_mutex_destroy(&st->mu);
    free(st);
    c->_priv = NULL;
}

/* Prints text line by line behind a prefix ("> ", "< "), control bytes escaped; a head's CRLF
 * ends its lines. */
static void print_lines(FILE *f, const char *prefix, const char *s, size_t n, bool head)
{
    bool bol = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (bol)
            fputs(prefix, f);
        bol = false;
        if (ch == '\r' && head && i + 1 < n && s[i + 1] == '\n')
            continue;
        if (ch == '\n') {
            fputc('\n', f);
            bol = true;
        } else if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) {
            fputc(ch, f);
        } else {
            fprintf(f, "\\x%02x", ch);
        }
    }
    if (!bol)
        fputc('\n', f);
}

void sq_cli_capture_print(const struct sq_cli_capture *c, FILE *f)
{
    const struct capture_state *st = c->_priv;
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++) {
        const struct sq_exchange *x = &st->kept[i].x;
        const char *first = st->mode == SQ_CAPTURE_FIRST_OF_KIND ? "first " : "";
        if (x->error >= 0)
            fprintf(f, "── %serror: %s, after %.3f ms (worker %u, %.3f s into the run) ──\n", first,
                    sq_errk_name((enum sq_errk)x->error), (double)x->latency_us / 1e3,
                    st->kept[i].worker, (double)x->end_ns / 1e9);
        else
            fprintf(f,
                    "── %sresponse with status %u, %.3f ms (worker %u, %.3f s into the run) ──\n",
                    first, x->status, (double)x->latency_us / 1e3, st->kept[i].worker,
                    (double)x->end_ns / 1e9);
        if (x->h2)
            fprintf(f, "(HTTP/2: the request in its HTTP/1.1 form, the response's status only)\n");
        /* the request's head, then its body */
        const char *hend = x->req_len ? memmem(x->req, x->req_len, "\r\n\r\n", 4) : NULL;
        size_t hlen = hend ? (size_t)(hend - x->req) + 2 : x->req_len;
        print_lines(f, "> ", x->req, hlen, true);
        fputs(">\n", f);
        if (hend && x->req_len > hlen + 2)
            print_lines(f, "> ", x->req + hlen + 2, x->req_len - hlen - 2, false);
        if (x->req_cut)
            fputs("> [request body cut at 1 KiB]\n", f);
        if (x->head_len == 0) {
            fputs("< (nothing arrived)\n", f);
        } else {
            const char *e = memmem(x->head, x->head_len, "\r\n\r\n", 4);
            print_lines(f, "< ", x->head, e ? (size_t)(e - x->head) + 2 : x->head_len, true);
            if (x->head_cut)
                fputs("< [head cut at 4 KiB]\n", f);
            else if (e)
                fputs("<\n", f);
        }
        if (x->body_len)
            print_lines(f, "< ", x->body, x->body_len, false);
        if (x->body_total > x->body_len)
            fprintf(f, "< [%llu more body bytes]\n",
                    (unsigned long long)(x->body_total - x->body_len));
    }
    if (st->more)
        fprintf(f, "── %llu more exchanges were not kept (at most %d) ──\n",
                (unsigned long long)st->more, CAPTURE_KEEP);
}

/* ---- exit status ---- */

int sq_cli_run_status(const struct sq_result *res, int sig, int64_t timeout_ns)
{
    if (sig)
        return SQ_EXIT_SIGNAL;
    if (sq_result_succeeded(res))
        return SQ_EXIT_OK;
    char why[1024];
    fprintf(stderr, "squall: no request succeeded: %s\n",
            sq_report_why_failed(res, timeout_ns, why, sizeof(why)));
    return SQ_EXIT_FAIL;
}
