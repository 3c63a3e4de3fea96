/* rpc: the HTTP client (httpc) and the EIP-1271 checker against a small JSON-RPC server that
 * this test runs on a thread of its own: real loopback sockets, real libcurl, canned answers.
 *
 * httpc: an answer arrives with its status and body, and the request carried the body, the
 * JSON content type and the URL's path (no Expect header); a non-200 status is still an answer; a
 * server that never answers ends in HTTPC_TIMEOUT near the deadline; a closed port and an answer
 * over 1 MiB end in HTTPC_ERROR; the error sentence never holds the URL's credentials; closing the
 * client fails the request in flight once, and a later request does not start. Every
 * callback counts its calls: each runs exactly once.
 *
 * eip1271: an address without code is refused after one eth_getCode and no eth_call; with
 * code, one batch of one eth_call per hash is sent and the lowest id answering the magic value
 * is the hash accepted; the code is remembered (a second check asks no eth_getCode); checks of
 * one key in flight share one call; a refusal is remembered (no second call); an HTTP error and
 * a silent server are UNAVAILABLE, the latter near the timeout. */
#define _GNU_SOURCE /* strcasestr */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "core/log.h"
#include "core/metrics.h"
#include "rpc/eip1271.h"
#include "rpc/httpc.h"
#include "loop.h"

/* --- the JSON-RPC server thread --- */

enum srv_mode {
    SRV_ANSWER, /* status and body as set */
    SRV_SILENT, /* reads the request, never answers (the connection stays open) */
    SRV_BIG,    /* a 200 whose body is over 1 MiB */
    SRV_RPC,    /* eth_getCode and eth_call batches, as code and magic_from say */
};

#define MAX_HELD 64

static struct {
    int fd, port, wake[2];
    pthread_t thread;
    pthread_mutex_t mu;
    /* set by the test (under mu) */
    int mode, status;
    char body[512];
    bool code;      /* SRV_RPC: the address holds code */
    int magic_from; /* SRV_RPC: the first batch item answering the magic value (and every
                     * one after it), -1 for none */
    /* seen by the server (under mu) */
    int requests, code_requests, batches, batch_items;
    char head[2048];  /* the last request's head */
    char rbody[8192]; /* and its body */
    int held[MAX_HELD], nheld;
} S = {.fd = -1};

static void srv_set(int mode, int status, const char *body)
{
    pthread_mutex_lock(&S.mu);
    S.mode = mode;
    S.status = status;
    snprintf(S.body, sizeof S.body, "%s", body ? body : "");
    pthread_mutex_unlock(&S.mu);
}

static int srv_count(const int *field)
{
    pthread_mutex_lock(&S.mu);
    int v = *field;
    pthread_mutex_unlock(&S.mu);
    return v;
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Reads one request (head and Content-Length body) from fd. Returns 0, or -1. */
static int read_request(int fd, char *head, size_t head_cap, char *body, size_t body_cap)
{
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        if (n + 1 >= head_cap)
            return -1;
        ssize_t k = recv(fd, head + n, head_cap - 1 - n, 0);
        if (k <= 0)
            return -1;
        n += (size_t)k;
        head[n] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    size_t head_len = (size_t)(end - head) + 4, have = n - head_len, want = 0;
    for (char *line = strstr(head, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
        if (!strncasecmp(line + 2, "Content-Length:", 15))
            want = strtoul(line + 17, NULL, 10);
    if (want >= body_cap || have > want)
        return -1;
    memcpy(body, head + head_len, have);
    while (have < want) {
        ssize_t k = recv(fd, body + have, want - have, 0);
        if (k <= 0)
            return -1;
        have += (size_t)k;
    }
    body[want] = '\0';
    head[head_len] = '\0';
    return 0;
}

static void send_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        p += k;
        len -= (size_t)k;
    }
}

static void answer(int fd, int status, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
}

/* The SRV_RPC answer to body: eth_getCode, or a batch of eth_calls (one item per "eth_call"). */
static void answer_rpc(int fd, const char *body)
{
    static const char magic[] =
        "0x1626ba7e00000000000000000000000000000000000000000000000000000000";
    static const char other[] =
        "0x0000000000000000000000000000000000000000000000000000000000000000";
    char out[4096];
    size_t len = 0;
    pthread_mutex_lock(&S.mu);
    if (strstr(body, "\"eth_getCode\"")) {
        S.code_requests++;
        len = (size_t)snprintf(out, sizeof out, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":\"%s\"}",
                               S.code ? "0x6080604052" : "0x");
    } else {
        int items = count_of(body, "\"eth_call\"");
        S.batches++;
        S.batch_items += items;
        out[len++] = '[';
        for (int i = 0; i < items && len < sizeof out - 200; i++)
            len += (size_t)snprintf(
                out + len, sizeof out - len, "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":\"%s\"}",
                i ? "," : "", i, S.magic_from >= 0 && i >= S.magic_from ? magic : other);
        out[len++] = ']';
    }
    pthread_mutex_unlock(&S.mu);
    answer(fd, 200, out, len);
}

static void serve(int fd)
{
    static char head[2048], body[8192];
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (read_request(fd, head, sizeof head, body, sizeof body) != 0) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&S.mu);
    S.requests++;
    snprintf(S.head, sizeof S.head, "%s", head);
    snprintf(S.rbody, sizeof S.rbody, "%s", body);
    int mode = S.mode, status = S.status;
    char canned[sizeof S.body];
    memcpy(canned, S.body, sizeof canned);
    if (mode == SRV_SILENT && S.nheld < MAX_HELD) {
        S.held[S.nheld++] = fd;
        pthread_mutex_unlock(&S.mu);
        return;
    }
    pthread_mutex_unlock(&S.mu);
    if (mode == SRV_ANSWER) {
        answer(fd, status, canned, strlen(canned));
    } else if (mode == SRV_BIG) {
        size_t len = (1u << 20) + 4096;
        char *big = malloc(len);
        if (big) {
            memset(big, ' ', len);
            answer(fd, 200, big, len);
            free(big);
        }
    } else if (mode == SRV_RPC) {
        answer_rpc(fd, body);
    }
    close(fd);
}

static void *srv_main(void *arg)
{
    (void)arg;
    for (int turns = 0; turns < 1000000; turns++) {
        struct pollfd p[2] = {{.fd = S.fd, .events = POLLIN}, {.fd = S.wake[0], .events = POLLIN}};
        if (poll(p, 2, 100) < 0 || p[1].revents)
            break;
        if (p[0].revents & POLLIN) {
            int c = accept(S.fd, NULL, NULL);
            if (c >= 0)
                serve(c);
        }
    }
    return NULL;
}

/* --- the loop --- */

static uv_loop_t loop;

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* Runs the loop until *flag reaches want or ms pass; returns whether it did. */
static bool run_until(const int *flag, int want, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (*flag < want && now_ms() < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return *flag >= want;
}

/* Runs the loop until the server has read n requests or ms pass; returns whether it has. */
static bool run_until_served(int n, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (srv_count(&S.requests) < n && now_ms() < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return srv_count(&S.requests) >= n;
}

static void drain_loop(void)
{
    loop_drain(&loop, 5000);
}

static char url[128];

static int group_setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    pthread_mutex_init(&S.mu, NULL);
    S.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (S.fd < 0 || bind(S.fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(S.fd, 64) != 0 ||
        getsockname(S.fd, (struct sockaddr *)&a, &len) != 0 || pipe(S.wake) != 0)
        return -1;
    S.port = ntohs(a.sin_port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/rpc/path", S.port);
    return pthread_create(&S.thread, NULL, srv_main, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (write(S.wake[1], "x", 1) != 1)
        return -1;
    pthread_join(S.thread, NULL);
    for (int i = 0; i < S.nheld; i++)
        close(S.held[i]);
    close(S.fd);
    close(S.wake[0]);
    close(S.wake[1]);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    pthread_mutex_lock(&S.mu);
    S.requests = S.code_requests = S.batches = S.batch_items = 0;
    S.head[0] = S.rbody[0] = '\0';
    S.code = true;
    S.magic_from = -1;
    pthread_mutex_unlock(&S.mu);
    srv_set(SRV_ANSWER, 200, "{}");
    return uv_loop_init(&loop);
}

static int teardown(void **state)
{
    (void)state;
    drain_loop();
    metrics_reset_sources();
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < S.nheld; i++)
        close(S.held[i]);
    S.nheld = 0;
    pthread_mutex_unlock(&S.mu);
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

/* --- httpc --- */

typedef struct got {
    int calls, status;
    long code;
    double seconds;
    char body[256], error[256];
} got;

static void on_result(void *data, const httpc_result *r)
{
    got *g = data;
    g->calls++;
    g->status = r->status;
    g->code = r->http_code;
    g->seconds = r->seconds;
    snprintf(g->body, sizeof g->body, "%s", r->body ? r->body : "");
    snprintf(g->error, sizeof g->error, "%s", r->error ? r->error : "");
}

static httpc *client(void)
{
    httpc *c = NULL;
    char err[256];
    assert_int_equal(httpc_new(&c, &loop, err, sizeof err), 0);
    return c;
}

static void client_done(httpc *c)
{
    httpc_close(c);
    drain_loop();
    httpc_free(c);
}

static void post(httpc *c, const char *to, const char *body, long timeout_ms, got *g)
{
    assert_int_equal(httpc_post_json(c, to, body, strlen(body), timeout_ms, on_result, g), 0);
    assert_int_equal(g->calls, 0); /* never inside httpc_post_json */
}

/* One request on a client of its own, to its end: what its callback got (it ran once), and
 * how long it took (ms). */
static got one_request(const char *to, const char *body, long timeout_ms, uint64_t *took)
{
    httpc *c = client();
    got g = {0};
    uint64_t t0 = now_ms();
    post(c, to, body, timeout_ms, &g);
    assert_true(run_until(&g.calls, 1, 10000));
    if (took)
        *took = now_ms() - t0;
    client_done(c);
    assert_int_equal(g.calls, 1);
    return g;
}

static void test_answer_and_request(void **state)
{
    (void)state;
    srv_set(SRV_ANSWER, 200, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x1\"}");
    got g = one_request(url, "{\"method\":\"eth_chainId\"}", 5000, NULL);
    assert_int_equal(g.status, HTTPC_OK);
    assert_int_equal(g.code, 200);
    assert_string_equal(g.body, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x1\"}");
    pthread_mutex_lock(&S.mu);
    assert_non_null(strstr(S.head, "POST /rpc/path HTTP/1.1\r\n"));
    assert_non_null(strcasestr(S.head, "\r\nContent-Type: application/json"));
    assert_null(strcasestr(S.head, "\r\nExpect:"));
    assert_string_equal(S.rbody, "{\"method\":\"eth_chainId\"}");
    pthread_mutex_unlock(&S.mu);
    /* Another status is an answer too, with its body. */
    srv_set(SRV_ANSWER, 500, "{\"error\":\"down\"}");
    g = one_request(url, "{}", 5000, NULL);
    assert_int_equal(g.status, HTTPC_OK);
    assert_int_equal(g.code, 500);
    assert_string_equal(g.body, "{\"error\":\"down\"}");
}

static void test_silent_server_times_out(void **state)
{
    (void)state;
    srv_set(SRV_SILENT, 0, NULL);
    uint64_t took;
    got g = one_request(url, "{}", 300, &took);
    assert_int_equal(g.status, HTTPC_TIMEOUT);
    assert_true(took >= 290);
    assert_true(took < 5000);
    assert_true(g.error[0] != '\0');
}

static void test_closed_port_and_credentials(void **state)
{
    (void)state;
    /* A port just taken and let go: nothing listens there. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char to[160];
    snprintf(to, sizeof to, "http://user:secretpass@127.0.0.1:%d/v3/pathkey?apikey=topsecret",
             ntohs(a.sin_port));
    got g = one_request(to, "{}", 5000, NULL);
    assert_int_equal(g.status, HTTPC_ERROR);
    assert_true(g.error[0] != '\0');
    assert_null(strstr(g.error, "secretpass"));
    assert_null(strstr(g.error, "topsecret"));
    assert_null(strstr(g.error, "pathkey"));
}

static void test_answer_over_1mib_fails(void **state)
{
    (void)state;
    srv_set(SRV_BIG, 0, NULL);
    got g = one_request(url, "{}", 10000, NULL);
    assert_int_equal(g.status, HTTPC_ERROR);
}

static void test_close_fails_request_in_flight_once(void **state)
{
    (void)state;
    srv_set(SRV_SILENT, 0, NULL);
    httpc *c = client();
    got g = {0};
    post(c, url, "{}", 10000, &g);
    assert_true(run_until_served(1, 5000)); /* the request is out, unanswered */
    httpc_close(c);
    assert_true(run_until(&g.calls, 1, 5000));
    assert_int_equal(g.status, HTTPC_ERROR);
    got late = {0};
    assert_int_equal(httpc_post_json(c, url, "{}", 2, 1000, on_result, &late), -1);
    drain_loop();
    httpc_free(c);
    assert_int_equal(g.calls, 1);
    assert_int_equal(late.calls, 0);
}

/* --- eip1271 --- */

typedef struct check {
    eip1271_waiter w; /* first: the callback finds the check from its waiter */
    int calls, outcome, which;
} check;

static void on_check(eip1271_waiter *w, int outcome, int which)
{
    check *k = (check *)w;
    k->calls++;
    k->outcome = outcome;
    k->which = which;
}

static eip1271 *checker(long timeout_ms)
{
    eip1271 *e = NULL;
    char err[256];
    eip1271_limits lim = {.timeout_ms = timeout_ms,
                          .max_inflight = 16,
                          .code_ttl_seconds = 60,
                          .max_per_second = 100};
    assert_int_equal(eip1271_new(&e, &loop, url, &lim, err, sizeof err), 0);
    return e;
}

static void checker_done(eip1271 *e)
{
    eip1271_close(e);
    drain_loop();
    eip1271_free(e);
}

static const uint8_t ADDR[20] = {0xaa, 1,  2,  3,  4,  5,  6,  7,  8,  9,
                                 10,   11, 12, 13, 14, 15, 16, 17, 18, 19};
static uint8_t SIG[65];
static uint8_t HASHES[2][32];

static void start_check(eip1271 *e, int round, check *k)
{
    uint8_t key[32];
    memset(SIG, 0x5a, sizeof SIG);
    memset(HASHES[0], 1, 32);
    memset(HASHES[1], 2, 32);
    eip1271_key(ADDR, SIG, sizeof SIG, round, key);
    memset(k, 0, sizeof *k);
    k->w.cb = on_check;
    eip1271_check(e, key, ADDR, SIG, sizeof SIG, (const uint8_t(*)[32])HASHES, 2, &k->w);
    assert_int_equal(k->calls, 0); /* never before eip1271_check returns */
}

static void test_no_code_refused_without_a_call(void **state)
{
    (void)state;
    srv_set(SRV_RPC, 0, NULL);
    pthread_mutex_lock(&S.mu);
    S.code = false;
    pthread_mutex_unlock(&S.mu);
    eip1271 *e = checker(5000);
    check k;
    start_check(e, 1, &k);
    assert_true(run_until(&k.calls, 1, 5000));
    assert_int_equal(k.outcome, EIP1271_INVALID);
    assert_int_equal(srv_count(&S.code_requests), 1);
    assert_int_equal(srv_count(&S.batches), 0);
    checker_done(e);
    assert_int_equal(k.calls, 1);
}

static void test_batch_accepts_lowest_magic_and_code_is_remembered(void **state)
{
    (void)state;
    srv_set(SRV_RPC, 0, NULL);
    pthread_mutex_lock(&S.mu);
    S.magic_from = 1;
    pthread_mutex_unlock(&S.mu);
    eip1271 *e = checker(5000);
    check k;
    start_check(e, 1, &k);
    assert_true(run_until(&k.calls, 1, 5000));
    assert_int_equal(k.outcome, EIP1271_VALID);
    assert_int_equal(k.which, 1);
    assert_int_equal(srv_count(&S.code_requests), 1);
    assert_int_equal(srv_count(&S.batches), 1);
    assert_int_equal(srv_count(&S.batch_items), 2); /* one eth_call per hash, one request */
    pthread_mutex_lock(&S.mu);
    assert_non_null(strstr(S.rbody, "\"to\":\"0xaa0102030405060708090a0b0c0d0e0f10111213\""));
    pthread_mutex_unlock(&S.mu);
    /* Another signature round of the same address: its code is known, no second lookup. */
    check k2;
    start_check(e, 2, &k2);
    assert_true(run_until(&k2.calls, 1, 5000));
    assert_int_equal(k2.outcome, EIP1271_VALID);
    assert_int_equal(srv_count(&S.code_requests), 1);
    assert_int_equal(srv_count(&S.batches), 2);
    /* Both hashes answered the magic value: the lower id is the one accepted. */
    pthread_mutex_lock(&S.mu);
    S.magic_from = 0;
    pthread_mutex_unlock(&S.mu);
    check k3;
    start_check(e, 3, &k3);
    assert_true(run_until(&k3.calls, 1, 5000));
    assert_int_equal(k3.outcome, EIP1271_VALID);
    assert_int_equal(k3.which, 0);
    checker_done(e);
}

static void test_same_key_shares_one_call_and_refusal_is_remembered(void **state)
{
    (void)state;
    srv_set(SRV_RPC, 0, NULL);
    eip1271 *e = checker(5000);
    check a, b;
    start_check(e, 1, &a);
    start_check(e, 1, &b);
    assert_true(run_until(&a.calls, 1, 5000));
    assert_true(run_until(&b.calls, 1, 5000));
    assert_int_equal(a.outcome, EIP1271_INVALID);
    assert_int_equal(b.outcome, EIP1271_INVALID);
    assert_int_equal(srv_count(&S.batches), 1);
    /* The refusal is remembered: the same key again costs the RPC nothing. */
    check c;
    start_check(e, 1, &c);
    assert_true(run_until(&c.calls, 1, 5000));
    assert_int_equal(c.outcome, EIP1271_INVALID);
    assert_int_equal(srv_count(&S.requests), 2); /* the lookup and the one batch */
    checker_done(e);
    assert_int_equal(a.calls + b.calls + c.calls, 3);
}

static void test_http_error_is_unavailable(void **state)
{
    (void)state;
    srv_set(SRV_ANSWER, 502, "bad gateway");
    eip1271 *e = checker(5000);
    check k;
    start_check(e, 1, &k);
    assert_true(run_until(&k.calls, 1, 5000));
    assert_int_equal(k.outcome, EIP1271_UNAVAILABLE);
    checker_done(e);
}

static void test_silent_rpc_is_unavailable_near_the_timeout(void **state)
{
    (void)state;
    srv_set(SRV_SILENT, 0, NULL);
    eip1271 *e = checker(300);
    check k;
    uint64_t t0 = now_ms();
    start_check(e, 1, &k);
    assert_true(run_until(&k.calls, 1, 10000));
    uint64_t took = now_ms() - t0;
    assert_int_equal(k.outcome, EIP1271_UNAVAILABLE);
    assert_true(took >= 290);
    assert_true(took < 5000);
    checker_done(e);
    assert_int_equal(k.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answer_and_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_server_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closed_port_and_credentials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_over_1mib_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_fails_request_in_flight_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_code_refused_without_a_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_accepts_lowest_magic_and_code_is_remembered,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_key_shares_one_call_and_refusal_is_remembered,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_error_is_unavailable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_rpc_is_unavailable_near_the_timeout, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
