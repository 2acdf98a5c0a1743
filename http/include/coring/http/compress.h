/*
 * Response compression (docs/compression.md): a response of a
 * compressible type (application/json, application/<x>+json, text/...,
 * JavaScript) whose body reaches http_server_config.compression_min_bytes
 * is sent in the coding the request's Accept-Encoding prefers
 * (coring/http/accept_encoding.h) among those the server offers, with
 * Content-Encoding, Vary: Accept-Encoding and the compressed length.
 * Handlers need do nothing: http_respond* and http_response_begin/_end
 * compress on the way out. This header is for a handler that answers the
 * same body many times: it keeps each coding's bytes in an
 * http_encoded_cache, so that a repeated answer is not compressed again.
 *
 * Compressors: libzstd, libbrotli's encoder, libdeflate (gzip), one state
 * each per worker thread, made on first use; their levels are fixed,
 * chosen from perf/compression.sh (zstd 1, br 2, gzip 1).
 */
#ifndef CORING_HTTP_COMPRESS_H
#define CORING_HTTP_COMPRESS_H

#include "coring/core/buffer.h"
#include "coring/http/accept_encoding.h"
#include "coring/http/server.h"

/* The default of http_server_config.compression_min_bytes (--compression-
 * min-bytes): a body under 1 KiB and its headers fit one TCP segment
 * either way (docs/compression.md). */
#define HTTP_COMPRESSION_MIN_BYTES_DEFAULT 1024

/* One body's encoded forms, kept by their owner (one worker thread) for as
 * long as the body stays the same. Zero-initialise it. */
typedef struct http_encoded_cache {
    cr_buf encoded[HTTP_CODING_COUNT]; /* by http_coding; [identity] unused */
    bool valid[HTTP_CODING_COUNT];     /* encoded[c] holds the body in coding c */
} http_encoded_cache;

/*
 * http_respond_cached - http_respond(@ctx, @status, @content_type, @body)
 * where the body, when compressed, is taken from @cache if it holds the
 * chosen coding, else compressed and kept there for the next answer.
 * @cache must describe @body: call http_encoded_cache_clear whenever the
 * body changes. @cache is owned by the caller, and used by one thread.
 * Handler context.
 */
void http_respond_cached(http_ctx *ctx, int status, const char *content_type, const cr_buf *body,
                         http_encoded_cache *cache);

/* http_encoded_cache_clear - forget @cache's encoded bodies (memory kept
 * for the next ones). Owner thread. */
void http_encoded_cache_clear(http_encoded_cache *cache);

/* http_encoded_cache_free - free @cache's memory; it is then empty and
 * may be used again. Owner thread. */
void http_encoded_cache_free(http_encoded_cache *cache);

/*
 * http_compress - compress the @len bytes at @src in @coding (not
 * identity) with this thread's compressor, into @dst (appended). Returns
 * 0, -ENOMEM (@dst could not grow, or a compressor could not be made), or
 * -EIO (the library failed). Any thread; the state is the calling
 * thread's (made on its first call, freed by http_compress_thread_fini).
 */
int http_compress(http_coding coding, const void *src, size_t len, cr_buf *dst);

/* http_compress_thread_fini - free the calling thread's compressors (the
 * HTTP layer calls it as a worker thread ends). */
void http_compress_thread_fini(void);

#endif
