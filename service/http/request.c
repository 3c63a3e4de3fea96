/* request: answering a request (envelope, headers, log line) and reading its parameters. */
#include "http/request.h"

#include <llhttp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/app.h"
#include "core/log.h"
#include "http/cors.h"
#include "core/metrics.h"

#define JSON_TYPE "application/json; charset=utf-8"

uint64_t request_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int request_read_flags(request *req)
{
    /* Cleared before it runs: one check per request, and the guard in finish_parts sees it sent. */
    int (*hook)(request *) = req->before_read;
    req->before_read = NULL;
    return hook ? hook(req) : 0;
}

const char *request_param(const request *req, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < req->nparams; i++)
        if (req->params[i].key_len == klen && !memcmp(req->params[i].key, key, klen)) {
            if (len)
                *len = req->params[i].val_len;
            return req->params[i].val;
        }
    return NULL;
}

slice request_path_param(const request *req, size_t n)
{
    slice s = {"", 0};
    if (n < req->npath_params)
        s = req->path_params[n];
    return s;
}

static void ensure_request_id(request *req)
{
    static const char hexd[] = "0123456789abcdef";
    static unsigned long long counter;
    static char prefix[9];
    if (req->request_id[0])
        return;
    if (!prefix[0]) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned p = (unsigned)(ts.tv_nsec ^ (ts.tv_sec << 11) ^ (unsigned long)uv_os_getpid());
        for (int i = 7; i >= 0; i--, p >>= 4)
            prefix[i] = hexd[p & 15];
    }
    /* "<8 hex: process>-<12 hex: sequence>" */
    unsigned long long n = ++counter;
    memcpy(req->request_id, prefix, 8);
    req->request_id[8] = '-';
    for (int i = 20; i >= 9; i--, n >>= 4)
        req->request_id[i] = hexd[n & 15];
    req->request_id[21] = '\0';
}

static void log_request(request *req)
{
    if (req->probe)
        return;
    uint64_t now = request_now_ns(), start = req->start_ns ? req->start_ns : now;
    metrics_observe_request(req->route_slot, req->status, (double)(now - start) / 1e9);
    buf *l = log_begin(req->status >= 500 ? LOG_ERROR : LOG_INFO, "request");
    if (!l)
        return;
    /* All four are known to need no escaping: request ids are checked printable ASCII without
     * quotes or backslashes (http.c), the rest come from tables or are hex. */
    log_str_safe(l, "request_id", req->request_id);
    log_str_safe(l, "method",
                 req->method >= 0 ? llhttp_method_name((llhttp_method_t)req->method) : NULL);
    log_str_safe(l, "route", req->route_name ? req->route_name : "-");
    log_int(l, "status", req->status);
    log_double(l, "duration_ms", (double)(now - start) / 1e6);
    log_str_safe(l, "caller", req->caller[0] ? req->caller : NULL);
    if (req->traceparent[0])
        log_strn(l, "trace_id", req->traceparent + 3, 32); /* checked lowercase hex (http.c) */
    log_end(l);
}

static const char *extra_headers_for(int status);
static void fail_with_headers(request *req, int status, const char *code, const char *message,
                              const char *field, const char *extra);

/* The answer's extra header lines: the handler's, then the trace context and CORS ones (each
 * only when the request asks for it, so a request without them is answered as before). */
static const char *answer_headers(const request *req, const char *extra, char *out, size_t cap)
{
    const char *cors = cors_response_headers(req);
    if (!req->traceparent[0] && !cors && !req->clear_session_cookie)
        return extra;
    int n = snprintf(out, cap, "%s", extra ? extra : "");
    if (req->traceparent[0] && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "traceparent: %s\r\n", req->traceparent);
    if (cors && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "%s", cors);
    if (req->clear_session_cookie && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "Set-Cookie: entityd_session=; Max-Age=0%s\r\n",
                      request_session_cookie_attributes(req));
    return n >= 0 && (size_t)n < cap ? out : extra;
}

/* Queues the bytes (the sink drops them for a client that is gone), logs, and hands the
 * connection back. */
static void finish_parts(request *req, int status, const char *ctype, const char *extra,
                         const slice *parts, size_t n)
{
    if (req->auth_veto) {
        /* The revocation check that ran with the handler's read refused the caller. */
        int veto = req->auth_veto;
        req->auth_veto = 0;
        if (veto == 401 && req->credential == REQ_CREDENTIAL_KEY)
            request_fail(req, 401, "unauthenticated", REQUEST_KEY_DEAD, NULL);
        else if (veto == 401 && req->credential != REQ_CREDENTIAL_QUERY)
            request_fail(req, 401, "unauthenticated", REQUEST_SESSION_DEAD, NULL);
        else if (veto == 401)
            request_fail(req, 401, "unauthenticated", "The signature has been revoked.", NULL);
        else if (veto == 504)
            request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        else
            request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    if (req->before_read && status < 400) {
        /* A success may not leave before the revocation check: a route flagged to read with
         * it answered without request_read_flags. A bug, refused loudly. */
        req->before_read = NULL;
        request_fail_internal(req, "read route answered before its revocation check");
        return;
    }
    ensure_request_id(req);
    req->status = status;
    req->answered = true;
    char headers[1024];
    req->sink->answer(req, status, ctype, answer_headers(req, extra, headers, sizeof headers),
                      parts, n);
    log_request(req);
    req->sink->done(req); /* may free req: nothing of it is touched after this */
}

struct conn *request_stream_begin(request *req, const char *ctype, const char *extra,
                                  size_t max_behind, void (*ended)(void *data), void *data)
{
    if (req->auth_veto || req->before_read || !req->sink->stream) {
        /* The same refusals as any answer's (finish_parts), or a sink without streams. */
        finish_parts(req, 200, ctype, extra, NULL, 0);
        return NULL;
    }
    ensure_request_id(req);
    req->status = 200;
    req->answered = true;
    char headers[1024];
    struct conn *c = req->sink->stream(
        req, ctype, answer_headers(req, extra, headers, sizeof headers), max_behind, ended, data);
    if (!c) {
        req->status = 499; /* logged as the client gone: nothing was sent */
        log_request(req);
        req->sink->done(req);
        return NULL;
    }
    log_request(req);
    request_reset(req);
    return c;
}

static void finish(request *req, int status, const char *ctype, const char *extra, const char *body,
                   size_t len)
{
    slice part = {body, len};
    finish_parts(req, status, ctype, extra, &part, 1);
}

void request_reply_parts(request *req, int status, const slice *parts, size_t n)
{
    finish_parts(req, status, JSON_TYPE, extra_headers_for(status), parts, n);
}

static buf scratch = BUF_INIT;

static int dump_cb(const char *s, size_t len, void *data)
{
    return buf_append(data, s, len);
}

static const char *extra_headers_for(int status)
{
    return status == 503 ? "Retry-After: 1\r\n" : NULL;
}

void request_reply(request *req, int status, json_t *body)
{
    request_reply_headers(req, status, body, extra_headers_for(status));
}

void request_reply_headers(request *req, int status, json_t *body, const char *extra)
{
    buf_reset(&scratch, 1 << 20);
    if (!body || json_dump_callback(body, dump_cb, &scratch, JSON_COMPACT) != 0) {
        json_decref(body);
        request_fail_internal(req, "response encoding failed");
        return;
    }
    json_decref(body);
    finish(req, status, JSON_TYPE, extra, scratch.data, scratch.len);
}

void request_fail_headers(request *req, int status, const char *code, const char *message,
                          const char *extra)
{
    fail_with_headers(req, status, code, message, NULL, extra);
}

static void fail_with_headers(request *req, int status, const char *code, const char *message,
                              const char *field, const char *extra)
{
    buf_reset(&scratch, 1 << 20);
    buf_append_str(&scratch, "{\"success\":false,\"error\":{\"code\":\"");
    buf_append_str(&scratch, code);
    buf_append_str(&scratch, "\",\"message\":\"");
    buf_append_json_escaped(&scratch, message, strlen(message));
    buf_append_str(&scratch, "\"");
    if (field) {
        buf_append_str(&scratch, ",\"field\":\"");
        buf_append_json_escaped(&scratch, field, strlen(field));
        buf_append_str(&scratch, "\"");
    }
    buf_append_str(&scratch, "}}");
    finish(req, status, JSON_TYPE, extra ? extra : extra_headers_for(status), scratch.data,
           scratch.len);
}

void request_fail(request *req, int status, const char *code, const char *message,
                  const char *field)
{
    fail_with_headers(req, status, code, message, field, NULL);
}

void request_fail_retry(request *req, int status, const char *code, const char *message,
                        long long seconds)
{
    char extra[64];
    snprintf(extra, sizeof extra, "Retry-After: %lld\r\n", seconds < 1 ? 1LL : seconds);
    fail_with_headers(req, status, code, message, NULL, extra);
}

void request_reply_empty(request *req, const char *extra)
{
    finish(req, 204, JSON_TYPE, extra, "", 0);
}

void request_fail_allow(request *req, const char *allow)
{
    char extra[160];
    snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
    fail_with_headers(req, 405, "method_not_allowed", "This path does not accept that method.",
                      NULL, extra);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when the bytes there are not one. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    size_t n;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

char *request_printable(const char *s, size_t len, char *out, size_t cap)
{
    static const char hexd[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t j = 0;
    for (size_t i = 0; i < len && j + 5 <= cap;) {
        size_t n = utf8_sequence(u + i, len - i);
        if (n) {
            memcpy(out + j, s + i, n);
            j += n;
            i += n;
        } else {
            out[j++] = '%';
            out[j++] = hexd[u[i] >> 4];
            out[j++] = hexd[u[i] & 15];
            i++;
        }
    }
    out[j] = '\0';
    return out;
}

void request_fail_field(request *req, const char *field, const char *message)
{
    request_fail(req, 400, "invalid_request", message, field);
}

void request_fail_internal(request *req, const char *what)
{
    ensure_request_id(req);
    buf *l = log_begin(LOG_ERROR, "internal error");
    if (l) {
        log_str(l, "request_id", req->request_id);
        log_str(l, "detail", what);
        log_end(l);
    }
    request_fail(req, 500, "internal", "An internal error occurred.", NULL);
}

const char *request_session_cookie_attributes(const request *req)
{
    /* Loop thread only, valid until the next call. Secure is left out only in development,
     * where the service is reached over plain HTTP. */
    static char out[64];
    bool dev = req->app && req->app->cfg.dev;
    const char *same = req->app && req->app->cfg.session_cookie_samesite
                           ? req->app->cfg.session_cookie_samesite
                           : "Lax";
    snprintf(out, sizeof out, "; Path=/api; HttpOnly%s; SameSite=%s", dev ? "" : "; Secure", same);
    return out;
}

void request_reply_raw(request *req, int status, const char *ctype, const char *body, size_t len)
{
    finish(req, status, ctype, NULL, body, len);
}

void *request_state(request *req, size_t size)
{
    void *st = arena_alloc(&req->pool, size);
    if (!st) {
        request_fail_internal(req, "out of memory");
        return NULL;
    }
    memset(st, 0, size);
    req->state = st;
    return st;
}

void request_reset(request *req)
{
    if (req->on_reset) {
        void (*fn)(void *) = req->on_reset;
        req->on_reset = NULL;
        fn(req->on_reset_data);
    }
    arena_reset(&req->pool);
    buf_reset(&req->url, 1024);
    buf_reset(&req->body, 1024);
    req->path = NULL;
    req->path_len = 0;
    req->params = NULL;
    req->nparams = 0;
    req->route = NULL;
    req->route_name = NULL;
    req->route_slot = -1;
    req->npath_params = 0;
    req->request_id[0] = '\0';
    req->traceparent[0] = '\0';
    req->origin[0] = '\0';
    req->preflight = false;
    req->bearer[0] = req->session_cookie[0] = req->user_agent[0] = '\0';
    req->last_event_id[0] = '\0';
    req->last_event_id_bad = false;
    req->bearer_bad = req->cookie_bad = false;
    req->credential = REQ_CREDENTIAL_NONE;
    req->api_key_id[0] = req->api_key_entity[0] = '\0';
    req->clear_session_cookie = false;
    req->has_content_type = req->json_content_type = false;
    req->expect_continue = false;
    req->body_total = 0;
    req->start_ns = 0;
    req->caller[0] = '\0';
    req->signed_in = false;
    req->answered = false;
    req->status = 0;
    req->state = NULL;
    req->before_read = NULL;
    req->auth_veto = 0;
    req->method = -1;
    req->auth = NULL;
}
