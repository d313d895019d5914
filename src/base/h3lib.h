/* base/h3lib.h - the QUIC and HTTP/3 libraries (GnuTLS, ngtcp2 with its GnuTLS crypto backend,
 * nghttp3), loaded only when HTTP/3 is used: `squall URL --http3`, a plan's `protocol: h3` or
 * `run --http3`, `squall target --http3`. Linked in, they (GnuTLS above all, with p11-kit,
 * nettle, gmp, libunistring...) were mapped into every run and GnuTLS's constructor ran in it:
 * 3 MB of a c=1 run's RSS (docs/internals/base.md, "h3lib").
 *
 * sq_h3lib_load opens each library by the SONAME CMake read from the one it compiled against
 * and looks up every function the HTTP/3 code calls (SQ_H3LIB_SYMS). After the struct, each of
 * those names is defined as its pointer, so a file that includes this header (after, or instead
 * of, the libraries' headers, which it includes itself) calls them unchanged: a library function
 * is no constant any more, so a static initializer cannot hold one (fill it at run time).
 * Nothing may be called before sq_h3lib_load returned 0. Built only with SQ_HAVE_H3.
 *
 * Here in base/ because http/ and target/ call nghttp3 and ngtcp2 and may not use net/.
 */
#ifndef SQ_BASE_H3LIB_H
#define SQ_BASE_H3LIB_H

#ifdef SQ_HAVE_H3

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stddef.h>

#include "base/err.h"

/* X(library, function): every library function the HTTP/3 code calls. ngtcp2's and nghttp3's
 * API macros expand to the *_versioned names, which are listed. */
#define SQ_H3LIB_SYMS(X)                                                                           \
    X(GNUTLS, gnutls_alert_get_strname)                                                            \
    X(GNUTLS, gnutls_alpn_set_protocols)                                                           \
    X(GNUTLS, gnutls_anti_replay_deinit)                                                           \
    X(GNUTLS, gnutls_anti_replay_enable)                                                           \
    X(GNUTLS, gnutls_anti_replay_init)                                                             \
    X(GNUTLS, gnutls_anti_replay_set_add_function)                                                 \
    X(GNUTLS, gnutls_anti_replay_set_ptr)                                                          \
    X(GNUTLS, gnutls_certificate_allocate_credentials)                                             \
    X(GNUTLS, gnutls_certificate_free_credentials)                                                 \
    X(GNUTLS, gnutls_certificate_set_x509_key_mem)                                                 \
    X(GNUTLS, gnutls_certificate_set_x509_system_trust)                                            \
    X(GNUTLS, gnutls_certificate_set_x509_trust_file)                                              \
    X(GNUTLS, gnutls_cipher_get)                                                                   \
    X(GNUTLS, gnutls_cipher_get_name)                                                              \
    X(GNUTLS, gnutls_credentials_set)                                                              \
    X(GNUTLS, gnutls_deinit)                                                                       \
    X(GNUTLS, gnutls_handshake_set_hook_function)                                                  \
    X(GNUTLS, gnutls_init)                                                                         \
    X(GNUTLS, gnutls_priority_deinit)                                                              \
    X(GNUTLS, gnutls_priority_init)                                                                \
    X(GNUTLS, gnutls_priority_set)                                                                 \
    X(GNUTLS, gnutls_priority_set_direct)                                                          \
    X(GNUTLS, gnutls_record_set_max_early_data_size)                                               \
    X(GNUTLS, gnutls_rnd)                                                                          \
    X(GNUTLS, gnutls_server_name_set)                                                              \
    X(GNUTLS, gnutls_session_get_data)                                                             \
    X(GNUTLS, gnutls_session_get_flags)                                                            \
    X(GNUTLS, gnutls_session_get_ptr)                                                              \
    X(GNUTLS, gnutls_session_get_verify_cert_status)                                               \
    X(GNUTLS, gnutls_session_is_resumed)                                                           \
    X(GNUTLS, gnutls_session_set_data)                                                             \
    X(GNUTLS, gnutls_session_set_ptr)                                                              \
    X(GNUTLS, gnutls_session_set_verify_cert)                                                      \
    X(GNUTLS, gnutls_session_ticket_enable_server)                                                 \
    X(GNUTLS, gnutls_session_ticket_send)                                                          \
    X(GNUTLS, gnutls_strerror)                                                                     \
    X(NGTCP2, ngtcp2_accept)                                                                       \
    X(NGTCP2, ngtcp2_conn_client_new_versioned)                                                    \
    X(NGTCP2, ngtcp2_conn_del)                                                                     \
    X(NGTCP2, ngtcp2_conn_early_data_rejected)                                                     \
    X(NGTCP2, ngtcp2_conn_extend_max_offset)                                                       \
    X(NGTCP2, ngtcp2_conn_extend_max_stream_offset)                                                \
    X(NGTCP2, ngtcp2_conn_extend_max_streams_bidi)                                                 \
    X(NGTCP2, ngtcp2_conn_get_conn_stat_versioned)                                                 \
    X(NGTCP2, ngtcp2_conn_get_expiry)                                                              \
    X(NGTCP2, ngtcp2_conn_get_max_data_left)                                                       \
    X(NGTCP2, ngtcp2_conn_get_stream_loss_count)                                                   \
    X(NGTCP2, ngtcp2_conn_get_remote_transport_params)                                             \
    X(NGTCP2, ngtcp2_conn_get_tls_alert)                                                           \
    X(NGTCP2, ngtcp2_conn_handle_expiry)                                                           \
    X(NGTCP2, ngtcp2_conn_is_in_closing_period)                                                    \
    X(NGTCP2, ngtcp2_conn_is_in_draining_period)                                                   \
    X(NGTCP2, ngtcp2_conn_is_local_stream)                                                         \
    X(NGTCP2, ngtcp2_conn_open_bidi_stream)                                                        \
    X(NGTCP2, ngtcp2_conn_open_uni_stream)                                                         \
    X(NGTCP2, ngtcp2_conn_read_pkt_versioned)                                                      \
    X(NGTCP2, ngtcp2_conn_server_new_versioned)                                                    \
    X(NGTCP2, ngtcp2_conn_set_early_remote_transport_params_versioned)                             \
    X(NGTCP2, ngtcp2_conn_set_tls_native_handle)                                                   \
    X(NGTCP2, ngtcp2_conn_shutdown_stream)                                                         \
    X(NGTCP2, ngtcp2_conn_shutdown_stream_read)                                                    \
    X(NGTCP2, ngtcp2_conn_shutdown_stream_write)                                                   \
    X(NGTCP2, ngtcp2_conn_update_pkt_tx_time)                                                      \
    X(NGTCP2, ngtcp2_conn_write_connection_close_versioned)                                        \
    X(NGTCP2, ngtcp2_conn_writev_stream_versioned)                                                 \
    X(NGTCP2, ngtcp2_connection_close_error_default)                                               \
    X(NGTCP2, ngtcp2_connection_close_error_set_application_error)                                 \
    X(NGTCP2, ngtcp2_connection_close_error_set_transport_error_liberr)                            \
    X(NGTCP2, ngtcp2_connection_close_error_set_transport_error_tls_alert)                         \
    X(NGTCP2, ngtcp2_is_bidi_stream)                                                               \
    X(NGTCP2, ngtcp2_path_storage_zero)                                                            \
    X(NGTCP2, ngtcp2_pkt_decode_version_cid)                                                       \
    X(NGTCP2, ngtcp2_pkt_write_version_negotiation)                                                \
    X(NGTCP2, ngtcp2_settings_default_versioned)                                                   \
    X(NGTCP2, ngtcp2_strerror)                                                                     \
    X(NGTCP2, ngtcp2_transport_params_default_versioned)                                           \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_client_initial_cb)                                              \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_decrypt_cb)                                                     \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_delete_crypto_aead_ctx_cb)                                      \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_delete_crypto_cipher_ctx_cb)                                    \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_encrypt_cb)                                                     \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_generate_stateless_reset_token)                                 \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_get_path_challenge_data_cb)                                     \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_gnutls_configure_client_session)                                \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_gnutls_configure_server_session)                                \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_hp_mask_cb)                                                     \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_recv_client_initial_cb)                                         \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_recv_crypto_data_cb)                                            \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_recv_retry_cb)                                                  \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_update_key_cb)                                                  \
    X(NGTCP2_CRYPTO, ngtcp2_crypto_version_negotiation_cb)                                         \
    X(NGHTTP3, nghttp3_conn_add_ack_offset)                                                        \
    X(NGHTTP3, nghttp3_conn_add_write_offset)                                                      \
    X(NGHTTP3, nghttp3_conn_bind_control_stream)                                                   \
    X(NGHTTP3, nghttp3_conn_bind_qpack_streams)                                                    \
    X(NGHTTP3, nghttp3_conn_block_stream)                                                          \
    X(NGHTTP3, nghttp3_conn_client_new_versioned)                                                  \
    X(NGHTTP3, nghttp3_conn_close_stream)                                                          \
    X(NGHTTP3, nghttp3_conn_del)                                                                   \
    X(NGHTTP3, nghttp3_conn_read_stream)                                                           \
    X(NGHTTP3, nghttp3_conn_resume_stream)                                                         \
    X(NGHTTP3, nghttp3_conn_server_new_versioned)                                                  \
    X(NGHTTP3, nghttp3_conn_set_max_client_streams_bidi)                                           \
    X(NGHTTP3, nghttp3_conn_set_stream_user_data)                                                  \
    X(NGHTTP3, nghttp3_conn_shutdown_stream_read)                                                  \
    X(NGHTTP3, nghttp3_conn_shutdown_stream_write)                                                 \
    X(NGHTTP3, nghttp3_conn_submit_request)                                                        \
    X(NGHTTP3, nghttp3_conn_submit_response)                                                       \
    X(NGHTTP3, nghttp3_conn_unblock_stream)                                                        \
    X(NGHTTP3, nghttp3_conn_writev_stream)                                                         \
    X(NGHTTP3, nghttp3_err_infer_quic_app_error_code)                                              \
    X(NGHTTP3, nghttp3_rcbuf_get_buf)                                                              \
    X(NGHTTP3, nghttp3_settings_default_versioned)

struct sq_h3lib {
#define SQ_H3LIB_FIELD(lib, sym) __typeof__(sym) *sym;
    SQ_H3LIB_SYMS(SQ_H3LIB_FIELD)
#undef SQ_H3LIB_FIELD
};
extern struct sq_h3lib sq_h3lib;

/* Loads the libraries once (thread-safe; later calls return the first answer). Returns 0, or
 * -ENOENT with why naming the library or function that is missing. */
SQ_MUST_CHECK int sq_h3lib_load(char *why, size_t len);

/* Sets in cb the ngtcp2_crypto callbacks a client and a server share (the packets' protection,
 * the handshake's crypto data, key updates); each side adds its own Initial's (and the client
 * its Retry's). After sq_h3lib_load returned 0. */
void sq_h3lib_crypto_callbacks(ngtcp2_callbacks *cb);

#ifndef SQ_H3LIB_IMPL
#define gnutls_alert_get_strname                 (sq_h3lib.gnutls_alert_get_strname)
#define gnutls_alpn_set_protocols                (sq_h3lib.gnutls_alpn_set_protocols)
#define gnutls_anti_replay_deinit                (sq_h3lib.gnutls_anti_replay_deinit)
#define gnutls_anti_replay_enable                (sq_h3lib.gnutls_anti_replay_enable)
#define gnutls_anti_replay_init                  (sq_h3lib.gnutls_anti_replay_init)
#define gnutls_anti_replay_set_add_function      (sq_h3lib.gnutls_anti_replay_set_add_function)
#define gnutls_anti_replay_set_ptr               (sq_h3lib.gnutls_anti_replay_set_ptr)
#define gnutls_certificate_allocate_credentials  (sq_h3lib.gnutls_certificate_allocate_credentials)
#define gnutls_certificate_free_credentials      (sq_h3lib.gnutls_certificate_free_credentials)
#define gnutls_certificate_set_x509_key_mem      (sq_h3lib.gnutls_certificate_set_x509_key_mem)
#define gnutls_certificate_set_x509_system_trust (sq_h3lib.gnutls_certificate_set_x509_system_trust)
#define gnutls_certificate_set_x509_trust_file   (sq_h3lib.gnutls_certificate_set_x509_trust_file)
#define gnutls_cipher_get                        (sq_h3lib.gnutls_cipher_get)
#define gnutls_cipher_get_name                   (sq_h3lib.gnutls_cipher_get_name)
#define gnutls_credentials_set                   (sq_h3lib.gnutls_credentials_set)
#define gnutls_deinit                            (sq_h3lib.gnutls_deinit)
#define gnutls_handshake_set_hook_function       (sq_h3lib.gnutls_handshake_set_hook_function)
#define gnutls_init                              (sq_h3lib.gnutls_init)
#define gnutls_priority_deinit                   (sq_h3lib.gnutls_priority_deinit)
#define gnutls_priority_init                     (sq_h3lib.gnutls_priority_init)
#define gnutls_priority_set                      (sq_h3lib.gnutls_priority_set)
#define gnutls_priority_set_direct               (sq_h3lib.gnutls_priority_set_direct)
#define gnutls_record_set_max_early_data_size    (sq_h3lib.gnutls_record_set_max_early_data_size)
#define gnutls_rnd                               (sq_h3lib.gnutls_rnd)
#define gnutls_server_name_set                   (sq_h3lib.gnutls_server_name_set)
#define gnutls_session_get_data                  (sq_h3lib.gnutls_session_get_data)
#define gnutls_session_get_flags                 (sq_h3lib.gnutls_session_get_flags)
#define gnutls_session_get_ptr                   (sq_h3lib.gnutls_session_get_ptr)
#define gnutls_session_get_verify_cert_status    (sq_h3lib.gnutls_session_get_verify_cert_status)
#define gnutls_session_is_resumed                (sq_h3lib.gnutls_session_is_resumed)
#define gnutls_session_set_data                  (sq_h3lib.gnutls_session_set_data)
#define gnutls_session_set_ptr                   (sq_h3lib.gnutls_session_set_ptr)
#define gnutls_session_set_verify_cert           (sq_h3lib.gnutls_session_set_verify_cert)
#define gnutls_session_ticket_enable_server      (sq_h3lib.gnutls_session_ticket_enable_server)
#define gnutls_session_ticket_send               (sq_h3lib.gnutls_session_ticket_send)
#define gnutls_strerror                          (sq_h3lib.gnutls_strerror)
#define ngtcp2_accept                            (sq_h3lib.ngtcp2_accept)
#define ngtcp2_conn_client_new_versioned         (sq_h3lib.ngtcp2_conn_client_new_versioned)
#define ngtcp2_conn_del                          (sq_h3lib.ngtcp2_conn_del)
#define ngtcp2_conn_early_data_rejected          (sq_h3lib.ngtcp2_conn_early_data_rejected)
#define ngtcp2_conn_extend_max_offset            (sq_h3lib.ngtcp2_conn_extend_max_offset)
#define ngtcp2_conn_extend_max_stream_offset     (sq_h3lib.ngtcp2_conn_extend_max_stream_offset)
#define ngtcp2_conn_extend_max_streams_bidi      (sq_h3lib.ngtcp2_conn_extend_max_streams_bidi)
#define ngtcp2_conn_get_conn_stat_versioned      (sq_h3lib.ngtcp2_conn_get_conn_stat_versioned)
#define ngtcp2_conn_get_expiry                   (sq_h3lib.ngtcp2_conn_get_expiry)
#define ngtcp2_conn_get_max_data_left            (sq_h3lib.ngtcp2_conn_get_max_data_left)
#define ngtcp2_conn_get_stream_loss_count        (sq_h3lib.ngtcp2_conn_get_stream_loss_count)
#define ngtcp2_conn_get_remote_transport_params  (sq_h3lib.ngtcp2_conn_get_remote_transport_params)
#define ngtcp2_conn_get_tls_alert                (sq_h3lib.ngtcp2_conn_get_tls_alert)
#define ngtcp2_conn_handle_expiry                (sq_h3lib.ngtcp2_conn_handle_expiry)
#define ngtcp2_conn_is_in_closing_period         (sq_h3lib.ngtcp2_conn_is_in_closing_period)
#define ngtcp2_conn_is_in_draining_period        (sq_h3lib.ngtcp2_conn_is_in_draining_period)
#define ngtcp2_conn_is_local_stream              (sq_h3lib.ngtcp2_conn_is_local_stream)
#define ngtcp2_conn_open_bidi_stream             (sq_h3lib.ngtcp2_conn_open_bidi_stream)
#define ngtcp2_conn_open_uni_stream              (sq_h3lib.ngtcp2_conn_open_uni_stream)
#define ngtcp2_conn_read_pkt_versioned           (sq_h3lib.ngtcp2_conn_read_pkt_versioned)
#define ngtcp2_conn_server_new_versioned         (sq_h3lib.ngtcp2_conn_server_new_versioned)
#define ngtcp2_conn_set_early_remote_transport_params_versioned                                    \
    (sq_h3lib.ngtcp2_conn_set_early_remote_transport_params_versioned)
#define ngtcp2_conn_set_tls_native_handle (sq_h3lib.ngtcp2_conn_set_tls_native_handle)
#define ngtcp2_conn_shutdown_stream       (sq_h3lib.ngtcp2_conn_shutdown_stream)
#define ngtcp2_conn_shutdown_stream_read  (sq_h3lib.ngtcp2_conn_shutdown_stream_read)
#define ngtcp2_conn_shutdown_stream_write (sq_h3lib.ngtcp2_conn_shutdown_stream_write)
#define ngtcp2_conn_update_pkt_tx_time    (sq_h3lib.ngtcp2_conn_update_pkt_tx_time)
#define ngtcp2_conn_write_connection_close_versioned                                               \
    (sq_h3lib.ngtcp2_conn_write_connection_close_versioned)
#define ngtcp2_conn_writev_stream_versioned   (sq_h3lib.ngtcp2_conn_writev_stream_versioned)
#define ngtcp2_connection_close_error_default (sq_h3lib.ngtcp2_connection_close_error_default)
#define ngtcp2_connection_close_error_set_application_error                                        \
    (sq_h3lib.ngtcp2_connection_close_error_set_application_error)
#define ngtcp2_connection_close_error_set_transport_error_liberr                                   \
    (sq_h3lib.ngtcp2_connection_close_error_set_transport_error_liberr)
#define ngtcp2_connection_close_error_set_transport_error_tls_alert                                \
    (sq_h3lib.ngtcp2_connection_close_error_set_transport_error_tls_alert)
#define ngtcp2_is_bidi_stream                (sq_h3lib.ngtcp2_is_bidi_stream)
#define ngtcp2_path_storage_zero             (sq_h3lib.ngtcp2_path_storage_zero)
#define ngtcp2_pkt_decode_version_cid        (sq_h3lib.ngtcp2_pkt_decode_version_cid)
#define ngtcp2_pkt_write_version_negotiation (sq_h3lib.ngtcp2_pkt_write_version_negotiation)
#define ngtcp2_settings_default_versioned    (sq_h3lib.ngtcp2_settings_default_versioned)
#define ngtcp2_strerror                      (sq_h3lib.ngtcp2_strerror)
#define ngtcp2_transport_params_default_versioned                                                  \
    (sq_h3lib.ngtcp2_transport_params_default_versioned)
#define ngtcp2_crypto_client_initial_cb         (sq_h3lib.ngtcp2_crypto_client_initial_cb)
#define ngtcp2_crypto_decrypt_cb                (sq_h3lib.ngtcp2_crypto_decrypt_cb)
#define ngtcp2_crypto_delete_crypto_aead_ctx_cb (sq_h3lib.ngtcp2_crypto_delete_crypto_aead_ctx_cb)
#define ngtcp2_crypto_delete_crypto_cipher_ctx_cb                                                  \
    (sq_h3lib.ngtcp2_crypto_delete_crypto_cipher_ctx_cb)
#define ngtcp2_crypto_encrypt_cb (sq_h3lib.ngtcp2_crypto_encrypt_cb)
#define ngtcp2_crypto_generate_stateless_reset_token                                               \
    (sq_h3lib.ngtcp2_crypto_generate_stateless_reset_token)
#define ngtcp2_crypto_get_path_challenge_data_cb (sq_h3lib.ngtcp2_crypto_get_path_challenge_data_cb)
#define ngtcp2_crypto_gnutls_configure_client_session                                              \
    (sq_h3lib.ngtcp2_crypto_gnutls_configure_client_session)
#define ngtcp2_crypto_gnutls_configure_server_session                                              \
    (sq_h3lib.ngtcp2_crypto_gnutls_configure_server_session)
#define ngtcp2_crypto_hp_mask_cb                 (sq_h3lib.ngtcp2_crypto_hp_mask_cb)
#define ngtcp2_crypto_recv_client_initial_cb     (sq_h3lib.ngtcp2_crypto_recv_client_initial_cb)
#define ngtcp2_crypto_recv_crypto_data_cb        (sq_h3lib.ngtcp2_crypto_recv_crypto_data_cb)
#define ngtcp2_crypto_recv_retry_cb              (sq_h3lib.ngtcp2_crypto_recv_retry_cb)
#define ngtcp2_crypto_update_key_cb              (sq_h3lib.ngtcp2_crypto_update_key_cb)
#define ngtcp2_crypto_version_negotiation_cb     (sq_h3lib.ngtcp2_crypto_version_negotiation_cb)
#define nghttp3_conn_add_ack_offset              (sq_h3lib.nghttp3_conn_add_ack_offset)
#define nghttp3_conn_add_write_offset            (sq_h3lib.nghttp3_conn_add_write_offset)
#define nghttp3_conn_bind_control_stream         (sq_h3lib.nghttp3_conn_bind_control_stream)
#define nghttp3_conn_bind_qpack_streams          (sq_h3lib.nghttp3_conn_bind_qpack_streams)
#define nghttp3_conn_block_stream                (sq_h3lib.nghttp3_conn_block_stream)
#define nghttp3_conn_client_new_versioned        (sq_h3lib.nghttp3_conn_client_new_versioned)
#define nghttp3_conn_close_stream                (sq_h3lib.nghttp3_conn_close_stream)
#define nghttp3_conn_del                         (sq_h3lib.nghttp3_conn_del)
#define nghttp3_conn_read_stream                 (sq_h3lib.nghttp3_conn_read_stream)
#define nghttp3_conn_resume_stream               (sq_h3lib.nghttp3_conn_resume_stream)
#define nghttp3_conn_server_new_versioned        (sq_h3lib.nghttp3_conn_server_new_versioned)
#define nghttp3_conn_set_max_client_streams_bidi (sq_h3lib.nghttp3_conn_set_max_client_streams_bidi)
#define nghttp3_conn_set_stream_user_data        (sq_h3lib.nghttp3_conn_set_stream_user_data)
#define nghttp3_conn_shutdown_stream_read        (sq_h3lib.nghttp3_conn_shutdown_stream_read)
#define nghttp3_conn_shutdown_stream_write       (sq_h3lib.nghttp3_conn_shutdown_stream_write)
#define nghttp3_conn_submit_request              (sq_h3lib.nghttp3_conn_submit_request)
#define nghttp3_conn_submit_response             (sq_h3lib.nghttp3_conn_submit_response)
#define nghttp3_conn_unblock_stream              (sq_h3lib.nghttp3_conn_unblock_stream)
#define nghttp3_conn_writev_stream               (sq_h3lib.nghttp3_conn_writev_stream)
#define nghttp3_err_infer_quic_app_error_code    (sq_h3lib.nghttp3_err_infer_quic_app_error_code)
#define nghttp3_rcbuf_get_buf                    (sq_h3lib.nghttp3_rcbuf_get_buf)
#define nghttp3_settings_default_versioned       (sq_h3lib.nghttp3_settings_default_versioned)
#endif

#endif
#endif
