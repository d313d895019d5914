/* plan/eval.h - what a plan does with a response: JSON paths, extractors and checks.
 *
 * Everything here is compiled when the plan loads and run on a worker's hot path against a
 * borrowed view of one response. Running allocates nothing except through the caller's
 * struct sq_buf (which keeps its memory between calls). The JSON scanner walks the document
 * without building a tree; malformed JSON is "not found", never a crash.
 */
#ifndef SQ_PLAN_EVAL_H
#define SQ_PLAN_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* One response as the evaluators see it; every span is borrowed for the call. */
struct sq_resp_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

struct sq_resp_view {
    int status;
    const struct sq_resp_header *headers;
    size_t nheaders;
    const char *body; /* the decoded body, or its first bytes when body_truncated */
    size_t body_len;
    bool body_truncated;
    int64_t duration_us; /* the request's latency, as recorded */
};

/* ---- JSON path: a documented subset: $ then any of .name, ['name'], ["name"], [N] ---- */

enum sq_json_type {
    SQ_JSON_NONE, /* not found */
    SQ_JSON_STRING,
    SQ_JSON_NUMBER,
    SQ_JSON_TRUE,
    SQ_JSON_FALSE,
    SQ_JSON_NULL,
    SQ_JSON_OBJECT,
    SQ_JSON_ARRAY,
};

/* A value found in a document: raw spans the value's text (strings include their quotes). */
struct sq_json_val {
    enum sq_json_type type;
    const char *raw;
    size_t raw_len;
};

struct sq_jpath;

/* Compiles a path. Returns 0, -SQ_EPARSE (err says where) or -ENOMEM. */
SQ_MUST_CHECK int sq_jpath_compile(const char *src, size_t len, struct sq_jpath **out, char *err,
                                   size_t errlen);
void sq_jpath_free(struct sq_jpath *p);
/* Finds the value. Returns 1 (found), 0 (absent, or the document is not valid JSON up to the
 * value). Never reads outside doc[0, len). */
int sq_jpath_eval(const struct sq_jpath *p, const char *doc, size_t len, struct sq_json_val *out);
/* Appends the value as text: a string decoded (escapes, \u with surrogate pairs to UTF-8), any
 * other value as its raw JSON text. Returns 0, -SQ_EPARSE (a bad escape) or -ENOMEM. */
SQ_MUST_CHECK int sq_json_val_text(const struct sq_json_val *v, struct sq_buf *out);

/* ---- extractors ---- */

enum sq_extract_kind { SQ_EXTRACT_JSON, SQ_EXTRACT_REGEX, SQ_EXTRACT_HEADER };

struct sq_extractor {
    enum sq_extract_kind kind;
    uint32_t var;          /* the per-VU variable it sets */
    struct sq_jpath *path; /* JSON */
    void *re;              /* REGEX: pcre2_code *, first capture group (or the whole match) */
    void *md;              /* REGEX: match data sized for re (one per extractor: a worker uses it
                              from one thread; the engine gives each worker its own copy with
                              sq_extractor_clone_state) */
    char *header;          /* HEADER: the field name, matched case-insensitively */
    size_t header_len;
};

/* Each returns 0, or -SQ_EPARSE with err saying what is wrong (regex: PCRE2's message and the
 * offset), or -ENOMEM. */
SQ_MUST_CHECK int sq_extractor_init_json(struct sq_extractor *e, const char *path, char *err,
                                         size_t errlen);
SQ_MUST_CHECK int sq_extractor_init_regex(struct sq_extractor *e, const char *pattern, char *err,
                                          size_t errlen);
SQ_MUST_CHECK int sq_extractor_init_header(struct sq_extractor *e, const char *name, char *err,
                                           size_t errlen);
void sq_extractor_dispose(struct sq_extractor *e);
/* True when the extractor reads the body / the headers. */
bool sq_extractor_needs_body(const struct sq_extractor *e);
/* Runs it; on success the value replaces out's content. Returns 1 (extracted), 0 (no match),
 * or -ENOMEM. md_scratch: REGEX match data private to the calling thread (NULL: e->md). */
int sq_extractor_run(const struct sq_extractor *e, const struct sq_resp_view *r, void *md_scratch,
                     struct sq_buf *out);
/* A fresh match-data block for e (REGEX) for another thread, or NULL when not needed. Free with
 * sq_extractor_free_state(). */
void *sq_extractor_clone_state(const struct sq_extractor *e);
void sq_extractor_free_state(void *md);

/* ---- checks ---- */

enum sq_check_kind {
    SQ_CHECK_STATUS,        /* status is one of codes[0, ncodes) */
    SQ_CHECK_BODY_CONTAINS, /* text occurs in the body */
    SQ_CHECK_JSON,          /* path op value */
    SQ_CHECK_HEADER_EQ,     /* header value equals text (exactly; name case-insensitive) */
    SQ_CHECK_HEADER_MATCH,  /* header value matches the regex */
    SQ_CHECK_DURATION,      /* duration op bound */
};

enum sq_cmp_op { SQ_CMP_EQ, SQ_CMP_NE, SQ_CMP_GT, SQ_CMP_GE, SQ_CMP_LT, SQ_CMP_LE, SQ_CMP_EXISTS };

struct sq_check {
    enum sq_check_kind kind;
    char *name; /* shown in the summary, e.g. "status 200", "$.count > 0" (owned) */
    int codes[16];
    size_t ncodes;
    char *text; /* BODY_CONTAINS, HEADER_EQ: the text; JSON: the expected value as written */
    size_t text_len;
    char *header; /* HEADER_*: the field name */
    size_t header_len;
    struct sq_jpath *path; /* JSON */
    enum sq_cmp_op op;     /* JSON, DURATION */
    bool num;              /* JSON: value is a number (compare numerically), else as text;
                              eq/ne with true/false/null compare the JSON literal */
    double value;          /* JSON (num), DURATION: µs */
    void *re, *md;         /* HEADER_MATCH: pcre2 code and match data (see sq_extractor) */
};

SQ_MUST_CHECK int sq_check_init_status(struct sq_check *c, const int *codes, size_t n, char *err,
                                       size_t errlen);
SQ_MUST_CHECK int sq_check_init_body_contains(struct sq_check *c, const char *text, char *err,
                                              size_t errlen);
/* value: the YAML scalar as written ("0", "ok", "true"); is_number: it was a plain number. */
SQ_MUST_CHECK int sq_check_init_json(struct sq_check *c, const char *path, enum sq_cmp_op op,
                                     const char *value, bool is_number, char *err, size_t errlen);
SQ_MUST_CHECK int sq_check_init_header_eq(struct sq_check *c, const char *name, const char *text,
                                          char *err, size_t errlen);
SQ_MUST_CHECK int sq_check_init_header_match(struct sq_check *c, const char *name,
                                             const char *regex, char *err, size_t errlen);
SQ_MUST_CHECK int sq_check_init_duration(struct sq_check *c, enum sq_cmp_op op, int64_t bound_us,
                                         char *err, size_t errlen);
void sq_check_dispose(struct sq_check *c);
bool sq_check_needs_body(const struct sq_check *c);
bool sq_check_needs_headers(const struct sq_check *c);
/* Runs it: true when it passed. scratch: a buffer the check may use (string decoding);
 * md_scratch: as for extractors. */
bool sq_check_run(const struct sq_check *c, const struct sq_resp_view *r, void *md_scratch,
                  struct sq_buf *scratch);
void *sq_check_clone_state(const struct sq_check *c);

/* "lt" -> SQ_CMP_LT ...; returns -1 for an unknown name. */
int sq_cmp_op_parse(const char *s);
const char *sq_cmp_op_name(enum sq_cmp_op op); /* "lt" ... */

#endif
