/* http/nghttp2lib.h - nghttp2, loaded by the first HTTP/2 session: the client's
 * (sq_h2_client_init, http/h2client.c) or the server's (sq_server__h2_new, server/h2.c: the
 * target's h2 and h2c). Linked in, it was mapped into every run, a plain HTTP/1.1 `squall URL`
 * too (about 0.1 MB resident: docs/benchmarks.md, round 6; docs/internals/base.md, "dynlib").
 *
 * After the struct, each function those files call is defined as its pointer (base/dynlib.h), so
 * they include this header after <nghttp2/nghttp2.h> and call them unchanged. Nothing may be
 * called before sq_nghttp2_load returned 0.
 */
#ifndef SQ_HTTP_NGHTTP2LIB_H
#define SQ_HTTP_NGHTTP2LIB_H

#include <nghttp2/nghttp2.h>
#include <stddef.h>

#include "base/err.h"

/* X(function): every nghttp2 function h2client.c and server/h2.c call (`nm -u`). */
#define SQ_NGHTTP2_SYMS(X)                                                                         \
    X(nghttp2_option_del)                                                                          \
    X(nghttp2_option_new)                                                                          \
    X(nghttp2_option_set_no_closed_streams)                                                        \
    X(nghttp2_option_set_peer_max_concurrent_streams)                                              \
    X(nghttp2_session_callbacks_del)                                                               \
    X(nghttp2_session_callbacks_new)                                                               \
    X(nghttp2_session_callbacks_set_on_begin_headers_callback)                                     \
    X(nghttp2_session_callbacks_set_on_data_chunk_recv_callback)                                   \
    X(nghttp2_session_callbacks_set_on_frame_recv_callback)                                        \
    X(nghttp2_session_callbacks_set_on_header_callback)                                            \
    X(nghttp2_session_callbacks_set_on_stream_close_callback)                                      \
    X(nghttp2_session_client_new3)                                                                 \
    X(nghttp2_session_del)                                                                         \
    X(nghttp2_session_get_stream_user_data)                                                        \
    X(nghttp2_session_mem_recv)                                                                    \
    X(nghttp2_session_mem_send)                                                                    \
    X(nghttp2_session_resume_data)                                                                 \
    X(nghttp2_session_server_new2)                                                                 \
    X(nghttp2_session_set_local_window_size)                                                       \
    X(nghttp2_session_set_stream_user_data)                                                        \
    X(nghttp2_session_want_read)                                                                   \
    X(nghttp2_session_want_write)                                                                  \
    X(nghttp2_submit_goaway)                                                                       \
    X(nghttp2_submit_request)                                                                      \
    X(nghttp2_submit_response)                                                                     \
    X(nghttp2_submit_rst_stream)                                                                   \
    X(nghttp2_submit_settings)

struct sq_nghttp2 {
#define SQ_NGHTTP2_FIELD(sym) __typeof__(sym) *sym;
    SQ_NGHTTP2_SYMS(SQ_NGHTTP2_FIELD)
#undef SQ_NGHTTP2_FIELD
};
extern struct sq_nghttp2 sq_nghttp2;

/* Loads libnghttp2 once (thread-safe; later calls are one acquire load). Returns 0, or -ENOENT
 * with why naming the library or function that is missing. */
SQ_MUST_CHECK int sq_nghttp2_load(char *why, size_t len);

#ifndef SQ_NGHTTP2_IMPL
#define nghttp2_option_del                   (sq_nghttp2.nghttp2_option_del)
#define nghttp2_option_new                   (sq_nghttp2.nghttp2_option_new)
#define nghttp2_option_set_no_closed_streams (sq_nghttp2.nghttp2_option_set_no_closed_streams)
#define nghttp2_option_set_peer_max_concurrent_streams                                             \
    (sq_nghttp2.nghttp2_option_set_peer_max_concurrent_streams)
#define nghttp2_session_callbacks_del (sq_nghttp2.nghttp2_session_callbacks_del)
#define nghttp2_session_callbacks_new (sq_nghttp2.nghttp2_session_callbacks_new)
#define nghttp2_session_callbacks_set_on_begin_headers_callback                                    \
    (sq_nghttp2.nghttp2_session_callbacks_set_on_begin_headers_callback)
#define nghttp2_session_callbacks_set_on_data_chunk_recv_callback                                  \
    (sq_nghttp2.nghttp2_session_callbacks_set_on_data_chunk_recv_callback)
#define nghttp2_session_callbacks_set_on_frame_recv_callback                                       \
    (sq_nghttp2.nghttp2_session_callbacks_set_on_frame_recv_callback)
#define nghttp2_session_callbacks_set_on_header_callback                                           \
    (sq_nghttp2.nghttp2_session_callbacks_set_on_header_callback)
#define nghttp2_session_callbacks_set_on_stream_close_callback                                     \
    (sq_nghttp2.nghttp2_session_callbacks_set_on_stream_close_callback)
#define nghttp2_session_client_new3           (sq_nghttp2.nghttp2_session_client_new3)
#define nghttp2_session_del                   (sq_nghttp2.nghttp2_session_del)
#define nghttp2_session_get_stream_user_data  (sq_nghttp2.nghttp2_session_get_stream_user_data)
#define nghttp2_session_mem_recv              (sq_nghttp2.nghttp2_session_mem_recv)
#define nghttp2_session_mem_send              (sq_nghttp2.nghttp2_session_mem_send)
#define nghttp2_session_resume_data           (sq_nghttp2.nghttp2_session_resume_data)
#define nghttp2_session_server_new2           (sq_nghttp2.nghttp2_session_server_new2)
#define nghttp2_session_set_local_window_size (sq_nghttp2.nghttp2_session_set_local_window_size)
#define nghttp2_session_set_stream_user_data  (sq_nghttp2.nghttp2_session_set_stream_user_data)
#define nghttp2_session_want_read             (sq_nghttp2.nghttp2_session_want_read)
#define nghttp2_session_want_write            (sq_nghttp2.nghttp2_session_want_write)
#define nghttp2_submit_goaway                 (sq_nghttp2.nghttp2_submit_goaway)
#define nghttp2_submit_request                (sq_nghttp2.nghttp2_submit_request)
#define nghttp2_submit_response               (sq_nghttp2.nghttp2_submit_response)
#define nghttp2_submit_rst_stream             (sq_nghttp2.nghttp2_submit_rst_stream)
#define nghttp2_submit_settings               (sq_nghttp2.nghttp2_submit_settings)
#endif

#endif
