/* http: the HTTP layer over a socketpair, with a stub dispatch instead of the router and no
 * Redis: pipelining answered in order, a request cut at every byte, keep-alive and its end,
 * HTTP/1.0, chunked bodies, 100-continue, the size limits (413, 414, 431), malformed and
 * ambiguous header blocks (400), HEAD, request ids, an answer given after the client went, and
 * the parser waiting while answers pile up unread. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/app.h"
#include "core/config.h"
#include "core/log.h"
#include "http/http.h"
#include "http/request.h"

#define MAX_BODY 4096

/* --- the stub behind the parser --- */

enum mode {
    MODE_ECHO, /* "METHOD target body_len|body" at once */
    MODE_HOLD, /* targets starting with /hold are kept for the test to answer; others echo */
    MODE_BIG,  /* big_len bytes of one letter per request: 'a', 'b', ... in arrival order */
};

static struct {
    enum mode mode;
    size_t big_len;
    int dispatched;
    request *held;
} g;

static void dispatch(request *req)
{
    const char *target = buf_cstr(&req->url);
    g.dispatched++;
    if (g.mode == MODE_HOLD && !strncmp(target, "/hold", 5)) {
        assert_null(g.held);
        g.held = req;
        return;
    }
    if (g.mode == MODE_BIG) {
        char *body = malloc(g.big_len);
        assert_non_null(body);
        memset(body, 'a' + (g.dispatched - 1) % 26, g.big_len);
        request_reply_raw(req, 200, "application/octet-stream", body, g.big_len);
        free(body);
        return;
    }
    char out[512];
    int n = snprintf(out, sizeof out, "%s %.100s %zu|%.200s",
                     llhttp_method_name((llhttp_method_t)req->method), target, req->body.len,
                     req->body.len ? buf_cstr(&req->body) : "");
    request_reply_raw(req, 200, "text/plain", out, (size_t)n);
}

/* --- a service end and a peer end --- */

static config cfg;
static app the_app;
static http_service service = {.app = &the_app, .dispatch = dispatch};
static uv_loop_t loop;
static conn_set set;
static conn *svc;
static int peer_fd = -1;
static buf rx = BUF_INIT; /* read from the peer end, not yet parsed */
static bool rx_eof;

static void pump_once(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    log_flush();
}

static void pump(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pump_once();
        usleep(200);
    }
}

static conn_limits limits_from(const config *c)
{
    return (conn_limits){.header_timeout_ms = (uint64_t)c->header_timeout_ms,
                         .idle_timeout_ms = (uint64_t)c->idle_timeout_ms,
                         .write_timeout_ms = (uint64_t)c->write_timeout_ms,
                         .write_buffer_bytes = (size_t)c->write_buffer_bytes,
                         .max_connections = (size_t)c->max_connections};
}

static void open_pair(const conn_limits *lim, int service_sndbuf)
{
    memset(&g, 0, sizeof g);
    buf_reset(&rx, 0);
    rx_eof = false;
    assert_int_equal(uv_loop_init(&loop), 0);
    the_app.loop = &loop;
    conn_set_init(&set, &loop, &http_protocol, lim, &service);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    if (service_sndbuf)
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &service_sndbuf, sizeof service_sndbuf);
    peer_fd = sv[1];
    svc = conn_open_fd(&set, sv[0]);
    assert_non_null(svc);
    assert_int_equal(set.count, 1);
}

static int setup(void **state)
{
    (void)state;
    conn_limits lim = limits_from(&cfg);
    open_pair(&lim, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (peer_fd >= 0)
        close(peer_fd);
    peer_fd = -1;
    conn_set_close_all(&set);
    conn_set_stop(&set);
    uv_run(&loop, UV_RUN_DEFAULT);
    log_flush();
    assert_int_equal(set.count, 0); /* every connection's memory went back */
    assert_int_equal(uv_loop_close(&loop), 0);
    return 0;
}

static void send_all(const char *s, size_t len)
{
    size_t off = 0;
    for (int i = 0; off < len && i < 100000; i++) {
        ssize_t n = send(peer_fd, s + off, len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else
            pump(1);
    }
    assert_int_equal(off, len);
}

static void send_str(const char *s)
{
    send_all(s, strlen(s));
}

/* Reads what the peer end has; notes EOF or a reset. */
static void rx_fill(void)
{
    char tmp[65536];
    for (int i = 0; i < 1000; i++) {
        ssize_t n = recv(peer_fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            assert_int_equal(buf_append(&rx, tmp, (size_t)n), 0);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            rx_eof = true;
        return;
    }
}

typedef struct resp {
    int status;
    char *head; /* status line and header lines, each ending in CRLF, NUL-terminated */
    char *body;
    size_t body_len;
    long content_length; /* -1 without the header */
} resp;

static void resp_free(resp *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* The value of header name (case-insensitive), copied into out; false when absent. */
static bool resp_header(const resp *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *line = strstr(r->head, "\r\n"); line && line[2]; line = strstr(line, "\r\n")) {
        line += 2;
        if (!strncasecmp(line, name, nlen) && line[nlen] == ':') {
            const char *v = line + nlen + 1, *end = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            size_t len = (size_t)(end - v);
            assert_true(len < cap);
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
    }
    return false;
}

/* Where the blank line after a header block begins in s, or NULL. */
static const char *find_blank_line(const char *s, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++)
        if (!memcmp(s + i, "\r\n\r\n", 4))
            return s + i;
    return NULL;
}

/* Takes one complete response off rx; `no_body` for an answer to HEAD. */
static bool rx_take(resp *r, bool no_body)
{
    if (rx.len == 0)
        return false;
    const char *end = find_blank_line(rx.data, rx.len);
    if (!end)
        return false;
    size_t head_len = (size_t)(end - rx.data) + 2;
    memset(r, 0, sizeof *r);
    r->head = strndup(rx.data, head_len);
    assert_non_null(r->head);
    assert_true(sscanf(r->head, "HTTP/1.1 %d ", &r->status) == 1);
    char cl[32];
    r->content_length = resp_header(r, "Content-Length", cl, sizeof cl) ? atol(cl) : -1;
    size_t want = 0;
    if (!no_body && r->status >= 200 && r->content_length > 0)
        want = (size_t)r->content_length;
    if (rx.len < head_len + 2 + want) {
        resp_free(r);
        return false;
    }
    r->body = malloc(want + 1);
    assert_non_null(r->body);
    memcpy(r->body, rx.data + head_len + 2, want);
    r->body[want] = '\0';
    r->body_len = want;
    buf_consume(&rx, head_len + 2 + want);
    return true;
}

/* Pumps until one response has arrived whole; fails the test after about two seconds. */
static void read_response(resp *r, bool no_body)
{
    for (int i = 0; i < 4000; i++) {
        if (rx_take(r, no_body))
            return;
        pump_once();
        rx_fill();
        if (rx_take(r, no_body))
            return;
        if (rx_eof)
            break;
        usleep(500);
    }
    fail_msg("no complete response (have %zu bytes%s)", rx.len, rx_eof ? ", EOF" : "");
}

/* Pumps until the service end has closed (EOF at the peer). */
static bool peer_sees_eof(void)
{
    for (int i = 0; i < 2000 && !rx_eof; i++) {
        pump_once();
        rx_fill();
        usleep(500);
    }
    return rx_eof;
}

/* Nothing more arrives while the loop runs a while. */
static void assert_nothing_more(void)
{
    pump(50);
    rx_fill();
    assert_int_equal(rx.len, 0);
    assert_false(rx_eof);
}

static void assert_error(const resp *r, int status, const char *code)
{
    assert_int_equal(r->status, status);
    char ct[128];
    assert_true(resp_header(r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, "application/json; charset=utf-8");
    json_error_t err;
    json_t *j = json_loadb(r->body, r->body_len, 0, &err);
    if (!j)
        fail_msg("not JSON: %s", r->body);
    assert_true(json_is_false(json_object_get(j, "success")));
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    json_decref(j);
    /* The envelope's literal shape, as the contract spells it. */
    char prefix[128];
    snprintf(prefix, sizeof prefix, "{\"success\":false,\"error\":{\"code\":\"%s\"", code);
    assert_memory_equal(r->body, prefix, strlen(prefix));
}

static void assert_ok_echo(const resp *r, const char *body)
{
    assert_int_equal(r->status, 200);
    assert_string_equal(r->body, body);
    assert_int_equal(r->content_length, (long)strlen(body));
}

static bool says_close(const resp *r)
{
    char v[64];
    return resp_header(r, "Connection", v, sizeof v) && !strcasecmp(v, "close");
}

/* --- framing --- */

static void test_pipelined_requests_are_answered_in_order(void **state)
{
    (void)state;
    send_str("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
             "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
             "DELETE /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "GET /a 0|");
    assert_false(says_close(&r));
    resp_free(&r);
    read_response(&r, false);
    assert_ok_echo(&r, "POST /b 5|hello");
    resp_free(&r);
    read_response(&r, false);
    assert_ok_echo(&r, "DELETE /c?q=1 0|");
    resp_free(&r);
    assert_int_equal(g.dispatched, 3);
    /* Keep-alive: the connection stays for more. */
    assert_nothing_more();
    assert_true(conn_alive(&set, svc));
    send_str("GET /d HTTP/1.1\r\nHost: x\r\n\r\n");
    read_response(&r, false);
    assert_ok_echo(&r, "GET /d 0|");
    resp_free(&r);
}

static void test_request_arriving_byte_by_byte(void **state)
{
    (void)state;
    const char *req = "PUT /split/path HTTP/1.1\r\nHost: x\r\nX-Request-Id: byte-1\r\n"
                      "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
    size_t len = strlen(req);
    for (size_t i = 0; i < len; i++) {
        send_all(req + i, 1);
        pump(2);
        /* Nothing is dispatched before the last byte of the body. */
        assert_int_equal(g.dispatched, i + 1 == len ? 1 : 0);
    }
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "PUT /split/path 7|{\"a\":1}");
    char id[64];
    assert_true(resp_header(&r, "X-Request-Id", id, sizeof id));
    assert_string_equal(id, "byte-1");
    resp_free(&r);
    assert_nothing_more();
}

static void test_keep_alive_then_connection_close(void **state)
{
    (void)state;
    send_str("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "GET /1 0|");
    assert_false(says_close(&r));
    resp_free(&r);
    pump(20);
    assert_true(conn_alive(&set, svc));

    /* The last request: answered, said so, then closed; what follows it is never read. */
    send_str("GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
             "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n");
    read_response(&r, false);
    assert_ok_echo(&r, "GET /2 0|");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_true(peer_sees_eof());
    assert_int_equal(rx.len, 0);
    assert_int_equal(g.dispatched, 2);
    assert_int_equal(set.count, 0);
}

static void test_http10_closes_unless_kept_alive(void **state)
{
    (void)state;
    send_str("GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "GET /old 0|");
    assert_false(says_close(&r));
    resp_free(&r);
    pump(20);
    assert_true(conn_alive(&set, svc));

    send_str("GET /older HTTP/1.0\r\n\r\n");
    read_response(&r, false);
    assert_ok_echo(&r, "GET /older 0|");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_true(peer_sees_eof());
    assert_int_equal(set.count, 0);
}

static void test_chunked_body(void **state)
{
    (void)state;
    send_str("POST /chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n"
             "6;ext=1\r\n world\r\n"
             "0\r\nTrailer: t\r\n\r\n"
             "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "POST /chunks 11|hello world");
    resp_free(&r);
    read_response(&r, false);
    assert_ok_echo(&r, "GET /after 0|");
    resp_free(&r);
}

static void test_chunked_body_over_the_limit_is_413(void **state)
{
    (void)state;
    char chunk[64];
    snprintf(chunk, sizeof chunk, "%x\r\n", MAX_BODY);
    send_str("POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    send_str(chunk);
    char body[MAX_BODY];
    memset(body, 'z', sizeof body);
    send_all(body, sizeof body);
    send_str("\r\n1\r\nz\r\n0\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_error(&r, 413, "payload_too_large");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_true(peer_sees_eof());
}

static void test_expect_100_continue_before_the_body(void **state)
{
    (void)state;
    send_str("POST /exp HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_int_equal(r.status, 100);
    assert_string_equal(r.head, "HTTP/1.1 100 Continue\r\n");
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_nothing_more();
    send_str("abcde");
    read_response(&r, false);
    assert_ok_echo(&r, "POST /exp 5|abcde");
    resp_free(&r);

    /* Without a body to wait for, no interim answer. */
    send_str("GET /exp2 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
    read_response(&r, false);
    assert_ok_echo(&r, "GET /exp2 0|");
    resp_free(&r);
}

static void test_declared_body_over_the_limit_is_413_before_the_body(void **state)
{
    (void)state;
    char req[256];
    snprintf(req, sizeof req,
             "POST /big HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
             MAX_BODY + 1);
    send_str(req); /* the body is never sent */
    resp r;
    read_response(&r, false);
    assert_error(&r, 413, "payload_too_large"); /* no 100 Continue first */
    assert_true(says_close(&r));
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_true(peer_sees_eof());
    assert_int_equal(rx.len, 0);
}

static void test_body_at_the_limit_is_accepted(void **state)
{
    (void)state;
    char req[256];
    snprintf(req, sizeof req, "POST /max HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
             MAX_BODY);
    send_str(req);
    char body[MAX_BODY];
    memset(body, 'y', sizeof body);
    send_all(body, sizeof body);
    resp r;
    read_response(&r, false);
    assert_int_equal(r.status, 200);
    assert_memory_equal(r.body, "POST /max 4096|yyyy", 19);
    resp_free(&r);
}

static void test_url_over_8k_is_414(void **state)
{
    (void)state;
    size_t n = 8 * 1024 + 1;
    char *url = malloc(n + 1);
    assert_non_null(url);
    url[0] = '/';
    memset(url + 1, 'u', n - 1);
    url[n] = '\0';
    send_str("GET ");
    send_str(url);
    send_str(" HTTP/1.1\r\nHost: x\r\n\r\n");
    free(url);
    resp r;
    read_response(&r, false);
    assert_error(&r, 414, "uri_too_long");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_true(peer_sees_eof());
}

static void test_url_of_8k_is_accepted(void **state)
{
    (void)state;
    size_t n = 8 * 1024;
    char *url = malloc(n + 1);
    assert_non_null(url);
    url[0] = '/';
    memset(url + 1, 'u', n - 1);
    url[n] = '\0';
    send_str("GET ");
    send_str(url);
    send_str(" HTTP/1.1\r\nHost: x\r\n\r\n");
    free(url);
    resp r;
    read_response(&r, false);
    assert_int_equal(r.status, 200);
    resp_free(&r);
    assert_int_equal(g.dispatched, 1);
}

static void test_headers_over_16k_are_431(void **state)
{
    (void)state;
    send_str("GET /h HTTP/1.1\r\nHost: x\r\n");
    char line[1100];
    memset(line, 'v', sizeof line);
    for (int i = 0; i < 16; i++) { /* 16 * ~1 KiB of values, plus the names */
        char name[32];
        snprintf(name, sizeof name, "X-Filler-%02d: ", i);
        send_str(name);
        send_all(line, 1024);
        send_str("\r\n");
    }
    send_str("\r\n");
    resp r;
    read_response(&r, false);
    assert_error(&r, 431, "headers_too_large");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_true(peer_sees_eof());
}

static void expect_400(const char *text)
{
    send_str(text);
    resp r;
    read_response(&r, false);
    assert_error(&r, 400, "invalid_request");
    assert_true(says_close(&r));
    resp_free(&r);
    assert_int_equal(g.dispatched, 0);
    assert_true(peer_sees_eof());
}

static void test_malformed_request_is_400(void **state)
{
    (void)state;
    expect_400("THIS IS NOT HTTP\r\n\r\n");
}

static void test_obs_fold_is_400(void **state)
{
    (void)state;
    expect_400("GET /f HTTP/1.1\r\nHost: x\r\nX-Long: first\r\n  second\r\n\r\n");
}

static void test_obs_fold_of_an_empty_first_line_is_400(void **state)
{
    (void)state;
    expect_400("GET /f HTTP/1.1\r\nHost: x\r\nX-Long:\r\n\tsecond\r\n\r\n");
}

static void test_space_before_colon_is_400(void **state)
{
    (void)state;
    expect_400("GET /s HTTP/1.1\r\nHost : x\r\n\r\n");
}

static void test_two_content_lengths_are_400(void **state)
{
    (void)state;
    expect_400("POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"
               "abcd");
}

static void test_error_after_a_good_request_keeps_the_order(void **state)
{
    (void)state;
    send_str("GET /good HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /bad HTTP/1.1\r\nHost : x\r\n\r\n");
    resp r;
    read_response(&r, false);
    assert_ok_echo(&r, "GET /good 0|");
    resp_free(&r);
    read_response(&r, false);
    assert_error(&r, 400, "invalid_request");
    resp_free(&r);
    assert_int_equal(g.dispatched, 1);
    assert_true(peer_sees_eof());
}

static void test_head_answer_has_no_body(void **state)
{
    (void)state;
    send_str("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /g HTTP/1.1\r\nHost: x\r\n\r\n");
    resp r;
    read_response(&r, true);
    assert_int_equal(r.status, 200);
    /* The length of the body a GET would get, and not one byte of it. */
    assert_int_equal(r.content_length, (long)strlen("HEAD /h 0|"));
    resp_free(&r);
    /* The next bytes are the next answer's status line. */
    assert_true(rx.len == 0 || !strncmp(rx.data, "HTTP/1.1 200", rx.len < 12 ? rx.len : 12));
    read_response(&r, false);
    assert_ok_echo(&r, "GET /g 0|");
    resp_free(&r);
}

static void test_request_id_echoed_or_made(void **state)
{
    (void)state;
    send_str("GET /id HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc-123_XYZ\r\n\r\n"
             "GET /id HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /id HTTP/1.1\r\nHost: x\r\nX-Request-Id: has space\r\n\r\n");
    resp r;
    char id[160];
    read_response(&r, false);
    assert_true(resp_header(&r, "X-Request-Id", id, sizeof id));
    assert_string_equal(id, "abc-123_XYZ");
    resp_free(&r);
    /* None given, or an unprintable one: the service's own "<8 hex>-<12 hex>". */
    for (int i = 0; i < 2; i++) {
        read_response(&r, false);
        assert_true(resp_header(&r, "X-Request-Id", id, sizeof id));
        assert_int_equal(strlen(id), 21);
        assert_int_equal(id[8], '-');
        assert_int_equal(strspn(id, "0123456789abcdef-"), 21);
        resp_free(&r);
    }
    /* An id from the previous request never leaks into the next. */
    send_str("GET /id HTTP/1.1\r\nHost: x\r\nX-Request-Id: first\r\n\r\n"
             "GET /id HTTP/1.1\r\nHost: x\r\n\r\n");
    read_response(&r, false);
    resp_free(&r);
    read_response(&r, false);
    assert_true(resp_header(&r, "X-Request-Id", id, sizeof id));
    assert_string_not_equal(id, "first");
    resp_free(&r);
}

/* --- answers given late --- */

static void test_late_answer_after_the_peer_closed(void **state)
{
    (void)state;
    g.mode = MODE_HOLD;
    send_str("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(20);
    assert_non_null(g.held);
    /* The next request waits behind the owed answer. */
    send_str("GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(20);
    assert_int_equal(g.dispatched, 1);
    close(peer_fd); /* the client goes; nothing of the answer was read */
    peer_fd = -1;
    pump(50);
    assert_int_equal(set.count, 1); /* the owed answer holds the memory */
    request *req = g.held;
    g.held = NULL;
    request_reply_raw(req, 200, "text/plain", "late", 4);
    pump(50);
    assert_false(conn_alive(&set, svc));
    assert_int_equal(set.count, 0);
}

static void test_late_answer_after_a_reset(void **state)
{
    (void)state;
    g.mode = MODE_HOLD;
    /* The first answer stays unread at the peer: closing then resets the connection. */
    send_str("GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(20);
    assert_int_equal(g.dispatched, 2);
    assert_non_null(g.held);
    close(peer_fd);
    peer_fd = -1;
    pump(50);
    assert_int_equal(svc->state, CONN_CLOSED); /* closed, memory kept for the owed answer */
    assert_true(conn_alive(&set, svc));
    request *req = g.held;
    g.held = NULL;
    request_fail(req, 503, "unavailable", "late", NULL); /* dropped; frees the connection */
    assert_false(conn_alive(&set, svc));
    assert_int_equal(set.count, 0);
}

static void test_late_answer_after_the_server_closed(void **state)
{
    (void)state;
    g.mode = MODE_HOLD;
    send_str("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(20);
    assert_non_null(g.held);
    conn_set_close_all(&set);
    pump(20);
    assert_int_equal(svc->state, CONN_CLOSED);
    assert_int_equal(set.count, 1);
    assert_true(peer_sees_eof());
    assert_int_equal(rx.len, 0);
    request *req = g.held;
    g.held = NULL;
    request_reply(req, 200, json_pack("{s:s}", "late", "yes"));
    assert_int_equal(set.count, 0);
}

static void test_held_answer_then_the_next_request(void **state)
{
    (void)state;
    g.mode = MODE_HOLD;
    send_str("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(20);
    assert_int_equal(g.dispatched, 1);
    rx_fill();
    assert_int_equal(rx.len, 0);
    request *req = g.held;
    g.held = NULL;
    request_reply_raw(req, 201, "text/plain", "held", 4);
    resp r;
    read_response(&r, false);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "held");
    resp_free(&r);
    read_response(&r, false);
    assert_ok_echo(&r, "GET /after 0|");
    resp_free(&r);
    assert_int_equal(g.dispatched, 2);
}

/* --- output over the high-water mark --- */

static void test_parser_waits_while_output_is_over_the_mark(void **state)
{
    (void)state;
    teardown(NULL); /* a connection with a small mark and small kernel buffers instead */
    conn_limits lim = limits_from(&cfg);
    lim.write_buffer_bytes = 16 * 1024;
    open_pair(&lim, 4096);
    g.mode = MODE_BIG;
    g.big_len = 32 * 1024;
    enum { N = 60 };
    char reqs[N * 40];
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(reqs + len, sizeof reqs - len, "GET /%02d HTTP/1.1\r\n\r\n", i);
    send_all(reqs, len); /* N pipelined requests; their answers are not read yet */
    size_t max_queued = 0;
    for (int i = 0; i < 100; i++) {
        pump(1);
        size_t q = svc->out.len + svc->writing.len;
        max_queued = q > max_queued ? q : max_queued;
    }
    assert_true(g.dispatched > 0);
    assert_true(g.dispatched < N);
    assert_true(max_queued <= lim.write_buffer_bytes + g.big_len + 512);
    assert_true(svc->pending_in.len > 0); /* the rest waits unparsed */
    /* Reading resumes the parser: every answer, whole and in order. */
    for (int i = 0; i < N; i++) {
        resp r;
        read_response(&r, false);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, g.big_len);
        char want = (char)('a' + i % 26);
        assert_int_equal(r.body[0], want);
        assert_int_equal(r.body[r.body_len - 1], want);
        resp_free(&r);
    }
    assert_int_equal(g.dispatched, N);
    assert_nothing_more();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* The request log goes nowhere (and never waits on the loop). */
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(devnull >= 0);
    log_init(NULL, devnull, 1 << 20);

    setenv("AUTH_SECRET", "unit-test-secret", 1);
    char max_body[16];
    snprintf(max_body, sizeof max_body, "%d", MAX_BODY);
    setenv("MAX_BODY_BYTES", max_body, 1);
    char err[256], *argv[] = {"test_http", NULL};
    if (config_load(&cfg, 1, argv, err, sizeof err) != CONFIG_OK) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    the_app.cfg = cfg;

    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_pipelined_requests_are_answered_in_order),
        T(test_request_arriving_byte_by_byte),
        T(test_keep_alive_then_connection_close),
        T(test_http10_closes_unless_kept_alive),
        T(test_chunked_body),
        T(test_chunked_body_over_the_limit_is_413),
        T(test_expect_100_continue_before_the_body),
        T(test_declared_body_over_the_limit_is_413_before_the_body),
        T(test_body_at_the_limit_is_accepted),
        T(test_url_over_8k_is_414),
        T(test_url_of_8k_is_accepted),
        T(test_headers_over_16k_are_431),
        T(test_malformed_request_is_400),
        T(test_obs_fold_is_400),
        T(test_obs_fold_of_an_empty_first_line_is_400),
        T(test_space_before_colon_is_400),
        T(test_two_content_lengths_are_400),
        T(test_error_after_a_good_request_keeps_the_order),
        T(test_head_answer_has_no_body),
        T(test_request_id_echoed_or_made),
        T(test_late_answer_after_the_peer_closed),
        T(test_late_answer_after_a_reset),
        T(test_late_answer_after_the_server_closed),
        T(test_held_answer_then_the_next_request),
        T(test_parser_waits_while_output_is_over_the_mark),
#undef T
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    buf_free(&rx);
    config_free(&cfg);
    close(devnull);
    return rc;
}
