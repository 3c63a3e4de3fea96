/* inproc: the service in one process without a network or Redis, for the fuzz targets. */
#define _GNU_SOURCE /* pipe2, F_SETPIPE_SZ */
#include "inproc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "api/dispatch.h"
#include "resources/routes.h"
#include "redis/group.h"
#include "redis/store.h"

static uv_loop_t loop;
static app the_app;
static server the_server;
/* The service's own wiring of HTTP to the route table (as main.c does it). */
static http_service the_service = {.app = &the_app, .dispatch = dispatch_request};
static int peer_fd = -1;
static buf written = BUF_INIT; /* what the current connection wrote */
static int log_fd = -1;        /* the read end of the pipe that stdout (the log) goes to */
static buf logged = BUF_INIT;  /* log lines written while the current connection was open */

/* Requests as the log tells them, in answer order: what the responses are checked against. */
typedef struct logged_request {
    bool head;
    int status;
} logged_request;

static size_t inproc_check_answers(const char *data, size_t len, const int *allowed,
                                   const logged_request *log, size_t nlog);
static void drain_log(void);

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "inproc: " __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

void inproc_init(const char *max_body)
{
    static bool done;
    if (done)
        return;
    done = true;
    /* Nothing from the caller's environment may change the service under test. */
    for (size_t i = 0; config_env_name(i); i++)
        unsetenv(config_env_name(i));
    setenv("AUTH_SECRET", "fuzz-secret-0123456789abcdef", 1);
    /* Never connected: the store is closed below before the connect can finish. */
    setenv("REDIS_URL", "redis://127.0.0.1:1/0", 1);
    setenv("PLATFORM_ADMINS", INPROC_PLATFORM_ADMIN, 1);
    setenv("MAX_BODY_BYTES", max_body, 1);
    signal(SIGPIPE, SIG_IGN);

    char err[256];
    char arg0[] = "entityd-fuzz";
    char *argv[] = {arg0, NULL};
    if (config_load(&the_app.cfg, 1, argv, err, sizeof err) != CONFIG_OK)
        DIE("config_load: %s", err);
    /* The request log (stdout) goes to a pipe read back after every input: one line per answer,
     * in order, says which answers were to HEAD and which status each had. libFuzzer writes
     * only to stderr. */
    int lp[2];
    if (pipe2(lp, O_CLOEXEC) != 0)
        DIE("pipe2: %s", strerror(errno));
    fcntl(lp[1], F_SETPIPE_SZ, 1 << 20);
    fcntl(lp[0], F_SETFL, O_NONBLOCK);
    if (dup2(lp[1], STDOUT_FILENO) < 0)
        DIE("dup2: %s", strerror(errno));
    close(lp[1]);
    log_fd = lp[0];
    log_set_level(LOG_INFO);
    if (uv_loop_init(&loop) != 0)
        DIE("uv_loop_init");
    the_app.loop = &loop;
    the_app.server = &the_server; /* never listens: /readyz reads only its draining flag */
    conn_limits limits = {
        .header_timeout_ms = (uint64_t)the_app.cfg.header_timeout_ms,
        .idle_timeout_ms = (uint64_t)the_app.cfg.idle_timeout_ms,
        .write_timeout_ms = (uint64_t)the_app.cfg.write_timeout_ms,
        .write_buffer_bytes = (size_t)the_app.cfg.write_buffer_bytes,
        .max_connections = (size_t)the_app.cfg.max_connections,
    };
    dispatch_init(router_routes, router_routes_count);
    conn_set_init(&the_server.conns, &loop, &http_protocol, &limits, &the_service);
    /* The deadline sweep must not keep the loop running once a connection is done. */
    uv_unref((uv_handle_t *)&the_server.conns.sweep);
    if (auth_new(&the_app.auth, &the_app, err, sizeof err) != 0)
        DIE("auth_new: %s", err);
    if (store_new(&the_app.store, &the_app, err, sizeof err) != 0)
        DIE("store_new: %s", err);
    /* Closed: every command is answered STORE_UNAVAILABLE (503) before store_command returns;
     * with the group closed too, so is every award (each leaves alone, at once). */
    store_close(the_app.store);
    the_app.groups = group_new(&loop, the_app.store);
    if (!the_app.groups)
        DIE("group_new");
    group_close(the_app.groups);
    uv_run(&loop, UV_RUN_DEFAULT);
}

app *inproc_app(void)
{
    return &the_app;
}

http_conn *inproc_conn_open(void)
{
    log_flush();
    drain_log();
    buf_reset(&logged, 1 << 16);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        DIE("socketpair: %s", strerror(errno));
    peer_fd = sv[1];
    conn *c = conn_open_fd(&the_server.conns, sv[0]);
    if (!c)
        DIE("conn_open_fd");
    return (http_conn *)c;
}

bool inproc_conn_alive(const http_conn *c)
{
    return conn_alive(&the_server.conns, &c->base);
}

bool inproc_conn_wants_input(const http_conn *c)
{
    return inproc_conn_alive(c) && conn_wants_input(&c->base);
}

static void drain_log(void)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(log_fd, tmp, sizeof tmp);
        if (n > 0)
            buf_append(&logged, tmp, (size_t)n);
        else if (!(n < 0 && errno == EINTR))
            break;
    }
}

static void drain_peer(void)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(peer_fd, tmp, sizeof tmp);
        if (n > 0) {
            buf_append(&written, tmp, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        break; /* EAGAIN, EOF or an error: nothing more now */
    }
}

void inproc_pump(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    drain_peer();
    drain_log();
}

/* The request lines of the log, in order. */
static logged_request *parse_log(size_t *n)
{
    log_flush();
    drain_log();
    size_t cap = 16, k = 0;
    logged_request *out = malloc(cap * sizeof *out);
    const char *p = buf_cstr(&logged), *end = p + logged.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            DIE("a log line without its newline");
        json_error_t jerr;
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, &jerr);
        if (!json_is_object(j))
            DIE("a log line is not a JSON object (%s): %.200s", jerr.text, p);
        const char *msg = json_string_value(json_object_get(j, "msg"));
        if (msg && !strcmp(msg, "request")) {
            const char *method = json_string_value(json_object_get(j, "method"));
            json_t *st = json_object_get(j, "status");
            if (!json_is_integer(st))
                DIE("a request log line without a status: %.200s", p);
            if (k == cap)
                out = realloc(out, (cap *= 2) * sizeof *out);
            out[k].head = method && !strcmp(method, "HEAD");
            out[k].status = (int)json_integer_value(st);
            k++;
        }
        json_decref(j);
        p = nl + 1;
    }
    *n = k;
    return out;
}

void inproc_half_close(http_conn *h)
{
    shutdown(peer_fd, SHUT_WR);
    for (int i = 0; i < 64; i++) {
        inproc_pump();
        if (!inproc_conn_alive(h))
            return;
        const conn *c = &h->base;
        /* Block only when an event is sure to come: an answer, a write, or the EOF read. */
        if (c->owed || c->write_active || conn_wants_input(c))
            uv_run(&loop, UV_RUN_ONCE);
        else
            return;
    }
}

size_t inproc_conn_finish(http_conn *h, const int *allowed)
{
    conn *c = &h->base;
    /* Let the answer in progress (a signature check on the threadpool) and the writes finish. */
    for (int i = 0; i < 10000 && inproc_conn_alive(h); i++) {
        inproc_pump();
        if (!inproc_conn_alive(h))
            break;
        if (c->owed) {
            uv_run(&loop, UV_RUN_ONCE);
            continue;
        }
        if (c->write_active || c->out.len)
            continue;
        break;
    }
    if (inproc_conn_alive(h))
        conn_close(c);
    /* Until nothing is left: the conn's handles and any threadpool work. */
    uv_run(&loop, UV_RUN_DEFAULT);
    if (inproc_conn_alive(h))
        DIE("a connection outlived its close: an answer is still owed (owed=%d)", (int)c->owed);
    drain_peer();
    close(peer_fd);
    peer_fd = -1;
    size_t nlog;
    logged_request *log = parse_log(&nlog);
    size_t n = inproc_check_answers(written.data, written.len, allowed, log, nlog);
    free(log);
    buf_free(&written);
    return n;
}

/* ---- response checks ---- */

typedef struct resp_check {
    const int *allowed;
    buf hname, hval, body;
    buf ctype, allow, retry_after;
    bool has_length, has_request_id;
    bool in_message;
    bool head; /* the answer being parsed is to HEAD: no body */
    size_t finals;
    const logged_request *log; /* NULL: not known */
    size_t nlog;
} resp_check;

static int r_message_begin(llhttp_t *p)
{
    resp_check *rc = p->data;
    rc->in_message = true;
    return 0;
}

static int r_header_field(llhttp_t *p, const char *at, size_t len)
{
    resp_check *rc = p->data;
    return buf_append(&rc->hname, at, len);
}

static int r_header_value(llhttp_t *p, const char *at, size_t len)
{
    resp_check *rc = p->data;
    return buf_append(&rc->hval, at, len);
}

static int r_header_value_complete(llhttp_t *p)
{
    resp_check *rc = p->data;
    const char *n = buf_cstr(&rc->hname);
    if (!strcasecmp(n, "content-type"))
        buf_append(&rc->ctype, rc->hval.data, rc->hval.len);
    else if (!strcasecmp(n, "content-length"))
        rc->has_length = true;
    else if (!strcasecmp(n, "x-request-id"))
        rc->has_request_id = rc->hval.len > 0;
    else if (!strcasecmp(n, "allow"))
        buf_append(&rc->allow, rc->hval.data, rc->hval.len);
    else if (!strcasecmp(n, "retry-after"))
        buf_append(&rc->retry_after, rc->hval.data, rc->hval.len);
    buf_reset(&rc->hname, 0);
    buf_reset(&rc->hval, 0);
    return 0;
}

static int r_headers_complete(llhttp_t *p)
{
    resp_check *rc = p->data;
    if (p->status_code >= 100 && p->status_code < 200)
        return 0;
    /* The answer to HEAD has the full answer's headers and no body. */
    rc->head = rc->log && rc->finals < rc->nlog && rc->log[rc->finals].head;
    return rc->head ? 1 : 0;
}

static int r_body(llhttp_t *p, const char *at, size_t len)
{
    resp_check *rc = p->data;
    return buf_append(&rc->body, at, len);
}

static const char *code_for(int status)
{
    switch (status) {
    case 401:
        return "unauthenticated";
    case 403:
        return "forbidden";
    case 404:
        return "not_found";
    case 405:
        return "method_not_allowed";
    case 409:
        return "conflict";
    case 413:
        return "payload_too_large";
    case 414:
        return "uri_too_long";
    case 415:
        return "unsupported_media_type";
    case 431:
        return "headers_too_large";
    case 500:
        return "internal";
    case 503:
        return "unavailable";
    case 504:
        return "timeout";
    default:
        return NULL;
    }
}

static void check_envelope(int status, const buf *body)
{
    json_error_t jerr;
    json_t *j = json_loadb(body->data ? body->data : "", body->len, 0, &jerr);
    if (!json_is_object(j))
        DIE("status %d: body is not a JSON object: %.200s", status, buf_cstr(body));
    json_t *ok = json_object_get(j, "success");
    if (!json_is_boolean(ok))
        DIE("status %d: no boolean success: %.200s", status, buf_cstr(body));
    if (status < 300) {
        if (!json_is_true(ok))
            DIE("status %d with success false", status);
    } else {
        json_t *e = json_object_get(j, "error");
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        json_t *field = json_object_get(e, "field");
        if (json_is_true(ok) || !code || !msg || !*msg || (field && !json_is_string(field)))
            DIE("status %d: malformed error envelope: %.300s", status, buf_cstr(body));
        const char *want = code_for(status);
        if (status == 400) {
            if (strcmp(code, "invalid_json") && strcmp(code, "invalid_request"))
                DIE("status 400 with code %s", code);
        } else if (!want || strcmp(code, want) != 0) {
            DIE("status %d with code %s", status, code);
        }
    }
    json_decref(j);
}

static int r_message_complete(llhttp_t *p)
{
    resp_check *rc = p->data;
    int status = (int)p->status_code;
    rc->in_message = false;
    if (status >= 100 && status < 200) {
        if (status != 100)
            DIE("interim status %d", status);
    } else {
        if (rc->log) {
            if (rc->finals >= rc->nlog)
                DIE("answer %zu (status %d) was never logged", rc->finals + 1, status);
            if (rc->log[rc->finals].status != status)
                DIE("answer %zu has status %d, its log line %d", rc->finals + 1, status,
                    rc->log[rc->finals].status);
        }
        rc->finals++;
        if (!rc->has_length || !rc->has_request_id)
            DIE("status %d without Content-Length or X-Request-Id", status);
        if (status == 500)
            DIE("500 internal error: %.300s", buf_cstr(&rc->body));
        if (!code_for(status) && status != 200 && status != 201 && status != 400)
            DIE("unexpected status %d", status);
        if (rc->allowed) {
            bool ok = false;
            for (const int *a = rc->allowed; *a && !ok; a++)
                ok = *a == status;
            if (!ok)
                DIE("status %d not allowed here: %.300s", status, buf_cstr(&rc->body));
        }
        if (status == 405 && rc->allow.len == 0)
            DIE("405 without Allow");
        if (status == 503 && strcmp(buf_cstr(&rc->retry_after), "1") != 0)
            DIE("503 without Retry-After: 1");
        const char *ct = buf_cstr(&rc->ctype);
        if (rc->head) {
            if (rc->body.len)
                DIE("an answer to HEAD with a body");
        } else if (!strncmp(ct, "application/json", 16)) {
            check_envelope(status, &rc->body);
        } else if (strncmp(ct, "text/plain", 10) != 0 || status != 200) {
            DIE("status %d with content type \"%s\"", status, ct);
        }
    }
    buf_reset(&rc->body, 0);
    buf_reset(&rc->ctype, 0);
    buf_reset(&rc->allow, 0);
    buf_reset(&rc->retry_after, 0);
    rc->has_length = rc->has_request_id = rc->head = false;
    return 0;
}

static size_t inproc_check_answers(const char *data, size_t len, const int *allowed,
                                   const logged_request *log, size_t nlog)
{
    static llhttp_settings_t s;
    static bool s_init;
    if (!s_init) {
        llhttp_settings_init(&s);
        s.on_message_begin = r_message_begin;
        s.on_header_field = r_header_field;
        s.on_header_value = r_header_value;
        s.on_header_value_complete = r_header_value_complete;
        s.on_headers_complete = r_headers_complete;
        s.on_body = r_body;
        s.on_message_complete = r_message_complete;
        s_init = true;
    }
    resp_check rc;
    memset(&rc, 0, sizeof rc);
    rc.allowed = allowed;
    rc.log = log;
    rc.nlog = nlog;
    llhttp_t p;
    llhttp_init(&p, HTTP_RESPONSE, &s);
    p.data = &rc;
    if (len) {
        llhttp_errno_t e = llhttp_execute(&p, data, len);
        if (e != HPE_OK)
            DIE("responses do not parse (%s at byte %zu): %.300s", llhttp_errno_name(e),
                (size_t)(llhttp_get_error_pos(&p) - data), data);
    }
    if (rc.in_message)
        DIE("a response is cut short: %.300s", data ? data : "");
    if (log && rc.finals != nlog)
        DIE("%zu requests logged, %zu answered", nlog, rc.finals);
    buf_free(&rc.hname);
    buf_free(&rc.hval);
    buf_free(&rc.body);
    buf_free(&rc.ctype);
    buf_free(&rc.allow);
    buf_free(&rc.retry_after);
    return rc.finals;
}
