/* plan/fyaml.h - libfyaml, loaded when YAML is first parsed (sq_plan__yaml_tree, the one way
 * into plan/yaml.c, the only file that calls it: every plan load, a plan or script check, the
 * MCP tools and the daemon go through it). Linked in, it was mapped into every run, a plain
 * `squall URL` too (docs/internals/base.md, "dynlib").
 *
 * After the struct, each function yaml.c calls is defined as its pointer (base/dynlib.h), so
 * yaml.c, which includes this header instead of <libfyaml.h>, calls them unchanged. Nothing may
 * be called before sq_fyaml_load returned 0.
 */
#ifndef SQ_PLAN_FYAML_H
#define SQ_PLAN_FYAML_H

#include <libfyaml.h>
#include <stddef.h>

#include "base/err.h"

/* X(library, function): every libfyaml function yaml.c calls (`nm -u` on yaml.c.o). */
#define SQ_FYAML_SYMS(X)                                                                           \
    X(FYAML, fy_diag_cfg_default)                                                                  \
    X(FYAML, fy_diag_create)                                                                       \
    X(FYAML, fy_diag_destroy)                                                                      \
    X(FYAML, fy_diag_errors_iterate)                                                               \
    X(FYAML, fy_diag_set_collect_errors)                                                           \
    X(FYAML, fy_event_start_mark)                                                                  \
    X(FYAML, fy_parser_create)                                                                     \
    X(FYAML, fy_parser_destroy)                                                                    \
    X(FYAML, fy_parser_event_free)                                                                 \
    X(FYAML, fy_parser_get_stream_error)                                                           \
    X(FYAML, fy_parser_parse)                                                                      \
    X(FYAML, fy_parser_set_string)                                                                 \
    X(FYAML, fy_token_get_text)                                                                    \
    X(FYAML, fy_token_scalar_style)

struct sq_fyaml {
#define SQ_FYAML_FIELD(lib, sym) __typeof__(sym) *sym;
    SQ_FYAML_SYMS(SQ_FYAML_FIELD)
#undef SQ_FYAML_FIELD
};
extern struct sq_fyaml sq_fyaml;

/* Loads libfyaml once (thread-safe). Returns 0, or -ENOENT with why naming the library or
 * function that is missing. */
SQ_MUST_CHECK int sq_fyaml_load(char *why, size_t len);

#ifndef SQ_FYAML_IMPL
#define fy_diag_cfg_default        (sq_fyaml.fy_diag_cfg_default)
#define fy_diag_create             (sq_fyaml.fy_diag_create)
#define fy_diag_destroy            (sq_fyaml.fy_diag_destroy)
#define fy_diag_errors_iterate     (sq_fyaml.fy_diag_errors_iterate)
#define fy_diag_set_collect_errors (sq_fyaml.fy_diag_set_collect_errors)
#define fy_event_start_mark        (sq_fyaml.fy_event_start_mark)
#define fy_parser_create           (sq_fyaml.fy_parser_create)
#define fy_parser_destroy          (sq_fyaml.fy_parser_destroy)
#define fy_parser_event_free       (sq_fyaml.fy_parser_event_free)
#define fy_parser_get_stream_error (sq_fyaml.fy_parser_get_stream_error)
#define fy_parser_parse            (sq_fyaml.fy_parser_parse)
#define fy_parser_set_string       (sq_fyaml.fy_parser_set_string)
#define fy_token_get_text          (sq_fyaml.fy_token_get_text)
#define fy_token_scalar_style      (sq_fyaml.fy_token_scalar_style)
#endif

#endif
