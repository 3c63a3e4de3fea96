/* http: llhttp callbacks, the request-size limits, and ordered (pipelined) responses. */
#include "http/http.h"

#include <stdio.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "core/app.h"

#define MAX_URL_BYTES    (8 * 1024)
#define MAX_HEADER_BYTES (16 * 1024)

static llhttp_settings_t settings;

static http_conn *conn_of(llhttp_t *p)
{
    return p->data;
}

static const config *cfg_of(const http_conn *c)
{
    return &c->req.app->cfg;
}

static int on_message_begin(llhttp_t *p)
{
    http_conn *c = conn_of(p);
    c->in_message = true;
    c->header_bytes = 0;
    c->req.start_ns = request_now_ns();
    /* A request has started: from now on its header block must arrive in time. */
    conn_read_deadline(&c->base, (uint64_t)cfg_of(c)->header_timeout_ms);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    http_conn *c = conn_of(p);
    c->req.method = p->method; /* known once the URL starts: logged even if parsing fails */
    if (c->req.url.len + len > MAX_URL_BYTES) {
        c->err_status = 414;
        return -1;
    }
    return buf_append(&c->req.url, at, len);
}

static int count_header_bytes(http_conn *c, size_t len)
{
    c->header_bytes += len;
    if (c->header_bytes > MAX_HEADER_BYTES) {
        c->err_status = 431;
        return -1;
    }
    return 0;
}

/* llhttp lets two forms through that RFC 9112 tells a server to refuse, because a proxy in
 * front may read them differently (request smuggling): white space between a field name and
 * its colon (5.1), and a value continued on the next line, obs-fold (5.2). Duplicate
 * Content-Length and Content-Length with Transfer-Encoding llhttp refuses itself. */
static int refuse_framing(http_conn *c)
{
    c->err_status = 400;
    return -1;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    http_conn *c = conn_of(p);
    if (count_header_bytes(c, len) != 0)
        return -1;
    if (memchr(at, ' ', len) || memchr(at, '\t', len))
        return refuse_framing(c);
    c->gap_from = at + len;
    return buf_append(&c->hname, at, len);
}

static int on_header_field_complete(llhttp_t *p)
{
    http_conn *c = conn_of(p);
    c->gap_open = true;
    c->gap_lf = false;
    return 0;
}

/* Notes an LF between a field's colon and the end of what this execute call holds. */
static void scan_gap(http_conn *c, const char *end)
{
    const char *from = c->gap_from ? c->gap_from : c->exec_start;
    if (from < end && memchr(from, '\n', (size_t)(end - from)))
        c->gap_lf = true;
    c->gap_from = NULL;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    http_conn *c = conn_of(p);
    if (count_header_bytes(c, len) != 0)
        return -1;
    /* llhttp joins a folded line to the value without a word: a value that starts on a later
     * line than its name, or a second span of a value that is not the same bytes cut by the
     * end of one read, is a fold. (An empty value comes as an empty span after its line end.) */
    if (len == 0)
        return 0;
    if (!c->value_open) {
        scan_gap(c, at);
        c->gap_open = false;
        if (c->gap_lf)
            return refuse_framing(c);
    } else if (!(c->value_at_end && at == c->exec_start)) {
        return refuse_framing(c);
    }
    c->value_open = true;
    c->value_at_end = at + len == c->exec_end;
    return buf_append(&c->hval, at, len);
}

static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
        (*len)--;
}

static bool is_json_media_type(const char *v, size_t len)
{
    const char *semi = memchr(v, ';', len);
    size_t mlen = semi ? (size_t)(semi - v) : len;
    trim(&v, &mlen);
    return mlen == 16 && strncasecmp(v, "application/json", 16) == 0;
}

static bool request_id_acceptable(const char *v, size_t len)
{
    if (len == 0 || len > REQ_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\')
            return false;
    }
    return true;
}

static bool lower_hex(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
            return false;
    return true;
}

static bool all_zero(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (v[i] != '0')
            return false;
    return true;
}

/* W3C Trace Context: "<version>-<trace id, 32>-<parent id, 16>-<flags>", lowercase hex, ids not
 * all zeros, version ff invalid; version 00 is exactly 55 characters, a later version may
 * append "-…" (its first 55 are read as 00's). */
static bool traceparent_acceptable(const char *v, size_t len)
{
    if (len < REQ_TRACEPARENT_LEN || v[2] != '-' || v[35] != '-' || v[52] != '-')
        return false;
    if (!lower_hex(v, 2) || !lower_hex(v + 3, 32) || !lower_hex(v + 36, 16) ||
        !lower_hex(v + 53, 2))
        return false;
    if (!memcmp(v, "ff", 2) || all_zero(v + 3, 32) || all_zero(v + 36, 16))
        return false;
    if (!memcmp(v, "00", 2))
        return len == REQ_TRACEPARENT_LEN;
    return len == REQ_TRACEPARENT_LEN || v[REQ_TRACEPARENT_LEN] == '-';
}

/* `Authorization: Bearer <token>` (RFC 6750: the scheme is case-insensitive, one or more
 * spaces, then the token's characters). Anything else, or a second Authorization header,
 * leaves bearer_bad set: a credential the caller meant to send is never silently dropped. */
static void http_take_bearer(request *req, const char *v, size_t vlen)
{
    bool second = req->bearer[0] || req->bearer_bad;
    req->bearer[0] = '\0';
    req->bearer_bad = true;
    if (second || vlen < 8 || strncasecmp(v, "bearer ", 7))
        return;
    v += 7;
    vlen -= 7;
    while (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    if (vlen == 0 || vlen > REQ_TOKEN_MAX)
        return;
    for (size_t i = 0; i < vlen; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (!(isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '+' ||
              ch == '/' || ch == '='))
            return;
    }
    memcpy(req->bearer, v, vlen);
    req->bearer[vlen] = '\0';
    req->bearer_bad = false;
}

/* The entityd_session cookie among `name=value; name=value` pairs (RFC 6265 section 5.4), in
 * any Cookie header of the request; the first one found counts. */
static void http_take_session_cookie(request *req, const char *v, size_t vlen)
{
    static const char name[] = "entityd_session=";
    const size_t nl = sizeof name - 1;
    if (req->session_cookie[0] || req->cookie_bad)
        return;
    size_t i = 0;
    while (i < vlen) {
        while (i < vlen && (v[i] == ' ' || v[i] == ';'))
            i++;
        size_t start = i;
        while (i < vlen && v[i] != ';')
            i++;
        size_t len = i - start;
        if (len > nl && !memcmp(v + start, name, nl)) {
            const char *val = v + start + nl;
            size_t n = len - nl;
            while (n && val[n - 1] == ' ')
                n--;
            if (n > REQ_TOKEN_MAX) {
                req->cookie_bad = true;
                return;
            }
            memcpy(req->session_cookie, val, n);
            req->session_cookie[n] = '\0';
            return;
        }
    }
}

static int on_header_value_complete(llhttp_t *p)
{
    http_conn *c = conn_of(p);
    const char *name = buf_cstr(&c->hname), *v = buf_cstr(&c->hval);
    size_t nlen = c->hname.len, vlen = c->hval.len;
    trim(&v, &vlen);
    if (nlen == 12 && !strncasecmp(name, "content-type", 12)) {
        c->req.has_content_type = true;
        c->req.json_content_type = is_json_media_type(v, vlen);
    } else if (nlen == 12 && !strncasecmp(name, "x-request-id", 12)) {
        if (request_id_acceptable(v, vlen)) {
            memcpy(c->req.request_id, v, vlen);
            c->req.request_id[vlen] = '\0';
        }
    } else if (nlen == 11 && !strncasecmp(name, "traceparent", 11)) {
        /* A malformed one is ignored, as W3C Trace Context asks; a second one replaces it. */
        c->req.traceparent[0] = '\0';
        if (traceparent_acceptable(v, vlen)) {
            memcpy(c->req.traceparent, v, REQ_TRACEPARENT_LEN);
            c->req.traceparent[REQ_TRACEPARENT_LEN] = '\0';
        }
    } else if (nlen == 6 && !strncasecmp(name, "origin", 6)) {
        c->req.origin[0] = '\0';
        if (vlen <= REQ_ORIGIN_MAX && request_id_acceptable(v, vlen)) {
            memcpy(c->req.origin, v, vlen);
            c->req.origin[vlen] = '\0';
        }
    } else if (nlen == 13 && !strncasecmp(name, "last-event-id", 13)) {
        c->req.last_event_id_bad = vlen > REQ_LAST_EVENT_ID_MAX;
        size_t n = c->req.last_event_id_bad ? 0 : vlen;
        memcpy(c->req.last_event_id, v, n);
        c->req.last_event_id[n] = '\0';
    } else if (nlen == 13 && !strncasecmp(name, "authorization", 13)) {
        http_take_bearer(&c->req, v, vlen);
    } else if (nlen == 6 && !strncasecmp(name, "cookie", 6)) {
        http_take_session_cookie(&c->req, v, vlen);
    } else if (nlen == 10 && !strncasecmp(name, "user-agent", 10)) {
        size_t n = vlen < REQ_USER_AGENT_MAX ? vlen : REQ_USER_AGENT_MAX;
        memcpy(c->req.user_agent, v, n);
        c->req.user_agent[n] = '\0';
    } else if (nlen == 29 && !strncasecmp(name, "access-control-request-method", 29)) {
        c->req.preflight = true;
    } else if (nlen == 6 && !strncasecmp(name, "expect", 6)) {
        c->req.expect_continue = vlen == 12 && !strncasecmp(v, "100-continue", 12);
    }
    buf_reset(&c->hname, 1024);
    buf_reset(&c->hval, 1024);
    c->value_open = c->gap_open = false;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    http_conn *c = conn_of(p);
    c->req.method = p->method;
    uint64_t max = (uint64_t)cfg_of(c)->max_body_bytes;
    bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
    /* Refused from the declared length alone, before a byte of the body is buffered. */
    if (has_length && p->content_length > max) {
        c->err_status = 413;
        return -1;
    }
    bool expects_body = (has_length && p->content_length > 0) || (p->flags & F_CHUNKED);
    if (c->req.expect_continue && expects_body) {
        /* Written as soon as the parser returns (conn_progress). */
        buf_append_str(conn_output(&c->base), "HTTP/1.1 100 Continue\r\n\r\n");
    }
    /* The header block is in; the body may trickle in until the idle timeout. */
    conn_read_deadline(&c->base, (uint64_t)cfg_of(c)->idle_timeout_ms);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    http_conn *c = conn_of(p);
    c->req.body_total += len;
    /* Chunked bodies have no declared length: the running total decides. */
    if (c->req.body_total > (uint64_t)cfg_of(c)->max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    return buf_append(&c->req.body, at, len);
}

static int on_message_complete(llhttp_t *p)
{
    http_conn *c = conn_of(p);
    c->in_message = false;
    if (!llhttp_should_keep_alive(p))
        conn_finish_input(&c->base); /* this request is the last one */
    /* One request at a time: stop here, answer, then resume with the rest of the input. */
    return HPE_PAUSED;
}

static void settings_init(void)
{
    static int done;
    if (done)
        return;
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    done = 1;
}

static void parse_error(http_conn *c, llhttp_errno_t e)
{
    conn_finish_input(&c->base);
    conn_hold(&c->base);
    switch (c->err_status) {
    case 413:
        request_fail(&c->req, 413, "payload_too_large", "The request body is larger than allowed.",
                     NULL);
        break;
    case 414:
        request_fail(&c->req, 414, "uri_too_long", "The request line is longer than 8 KiB.", NULL);
        break;
    case 431:
        request_fail(&c->req, 431, "headers_too_large", "The request headers exceed 16 KiB.", NULL);
        break;
    case 400:
        request_fail(&c->req, 400, "invalid_request",
                     "The request's header block is ambiguous (white space before a colon, or "
                     "a folded line).",
                     NULL);
        break;
    default: {
        char msg[160];
        snprintf(msg, sizeof msg, "The HTTP request is malformed (%s).",
                 llhttp_errno_name(e) + 4 /* drop "HPE_" */);
        request_fail(&c->req, 400, "invalid_request", msg, NULL);
    }
    }
}

/* Runs the parser over data until it is consumed or the connection may parse no further (a
 * request dispatched and not yet answered, output over the high-water mark, input finished).
 * Returns how many bytes were consumed. */
static size_t http_feed(conn *base, const char *data, size_t len)
{
    http_conn *c = (http_conn *)base;
    size_t off = 0;
    while (off < len && conn_may_parse(base)) {
        c->exec_start = data + off;
        c->exec_end = data + len;
        c->gap_from = NULL;
        llhttp_errno_t e = llhttp_execute(&c->parser, data + off, len - off);
        if (e == HPE_OK) {
            if (c->gap_open) /* the buffer ended between a colon and its value */
                scan_gap(c, data + len);
            off = len;
        } else if (e == HPE_PAUSED) {
            off = (size_t)(llhttp_get_error_pos(&c->parser) - data);
            llhttp_resume(&c->parser);
            conn_hold(base);
            /* May answer before it returns; c stays valid (conn.h: only a late answer frees). */
            ((const http_service *)base->set->ctx)->dispatch(&c->req);
        } else if (e == HPE_PAUSED_UPGRADE) {
            /* No protocol upgrades here: answer what was asked, then close. */
            off = len;
            conn_finish_input(base);
        } else {
            parse_error(c, e);
            off = len;
        }
    }
    return off;
}

static void http_answer(request *req, int status, const char *content_type,
                        const char *extra_headers, const slice *parts, size_t n);
static void http_answered(request *req);
static struct conn *http_stream(request *req, const char *ctype, const char *extra,
                                size_t max_behind, void (*ended)(void *data), void *data);
static const request_sink http_sink = {
    .answer = http_answer, .done = http_answered, .stream = http_stream};

static void http_open(conn *base, bool over_capacity)
{
    http_conn *c = (http_conn *)base;
    settings_init();
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c; /* llhttp_init zeroes data */
    c->req.sink = &http_sink;
    c->req.sink_ctx = c;
    c->req.app = ((const http_service *)base->set->ctx)->app;
    c->req.route_slot = -1;
    c->req.method = -1; /* none read yet */
    if (over_capacity) {
        conn_finish_input(base);
        conn_hold(base);
        request_fail(&c->req, 503, "unavailable", "Too many connections; try again shortly.", NULL);
    }
}

static void http_free(conn *base)
{
    http_conn *c = (http_conn *)base;
    request_reset(&c->req);
    buf_free(&c->req.url); /* the reset keeps small buffers for the next request */
    buf_free(&c->req.body);
    buf_free(&c->hname);
    buf_free(&c->hval);
}

static bool http_mid_request(const conn *base)
{
    return ((const http_conn *)base)->in_message;
}

static void http_trim(conn *base)
{
    http_conn *c = (http_conn *)base;
    buf_free(&c->hname);
    buf_free(&c->hval);
    buf_free(&c->req.url);
    buf_free(&c->req.body);
}

const conn_protocol http_protocol = {
    .trim = http_trim,
    .mid_request = http_mid_request,
    .conn_size = sizeof(http_conn),
    .open = http_open,
    .feed = http_feed,
    .free = http_free,
};

static void http_answered(request *req)
{
    http_conn *c = req->sink_ctx;
    request_reset(req);
    conn_answered(&c->base); /* may free c */
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 429:
        return "Too Many Requests";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

/* Appends a complete response to the connection's output (nothing for a client that is gone):
 * the body is the concatenation of n parts. */
static void http_answer(request *req, int status, const char *content_type,
                        const char *extra_headers, const slice *parts, size_t n)
{
    http_conn *c = req->sink_ctx;
    if (!conn_accepts_output(&c->base))
        return;
    const char *request_id = req->request_id;
    size_t body_len = 0;
    for (size_t i = 0; i < n; i++)
        body_len += parts[i].len;
    buf *o = conn_output(&c->base);
    if (buf_reserve(o, body_len + 256) != 0)
        return;
    /* The usual answer's first lines are one copy. */
    static const char ok_json[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json; "
                                  "charset=utf-8\r\nContent-Length: ";
    if (status == 200 && !strcmp(content_type, "application/json; charset=utf-8")) {
        buf_append(o, ok_json, sizeof ok_json - 1);
        buf_append_uint(o, body_len);
    } else {
        buf_append_str(o, "HTTP/1.1 ");
        buf_append_uint(o, (size_t)status);
        buf_append(o, " ", 1);
        buf_append_str(o, reason(status));
        if (status != 204) { /* a 204 has no body, so neither its type nor its length (RFC 9110) */
            buf_append_str(o, "\r\nContent-Type: ");
            buf_append_str(o, content_type);
            buf_append_str(o, "\r\nContent-Length: ");
            buf_append_uint(o, body_len);
        }
    }
    static const char rid[] = "\r\nX-Request-Id: ";
    buf_append(o, rid, sizeof rid - 1);
    buf_append_str(o, request_id);
    buf_append(o, "\r\n", 2);
    if (extra_headers)
        buf_append_str(o, extra_headers);
    if (conn_last_answer(&c->base))
        buf_append_str(o, "Connection: close\r\n");
    buf_append(o, "\r\n", 2);
    /* An answer to HEAD carries the headers of the answer, never its body. */
    if (c->req.method == HTTP_HEAD)
        return;
    for (size_t i = 0; i < n; i++)
        buf_append(o, parts[i].s, parts[i].len);
}

/* A streamed answer's head (request_stream_begin), then the connection is the stream's. No
 * Content-Length and no chunked coding: the body ends when the connection closes (RFC 9112
 * section 6.3), which every EventSource reads as the stream's end and reconnects after. */
static struct conn *http_stream(request *req, const char *ctype, const char *extra,
                                size_t max_behind, void (*ended)(void *data), void *data)
{
    http_conn *c = req->sink_ctx;
    if (!conn_accepts_output(&c->base) || c->base.state != CONN_OPEN)
        return NULL;
    buf *o = conn_output(&c->base);
    buf_append_str(o, "HTTP/1.1 200 OK\r\nContent-Type: ");
    buf_append_str(o, ctype);
    buf_append_str(o, "\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nX-Request-Id: ");
    buf_append_str(o, req->request_id);
    buf_append(o, "\r\n", 2);
    if (extra)
        buf_append_str(o, extra);
    if (buf_append_str(o, "Connection: close\r\n\r\n") != 0 ||
        conn_stream_start(&c->base, max_behind, ended, data) != 0) {
        conn_close(&c->base);
        return NULL;
    }
    conn_progress(&c->base);
    return &c->base;
}
