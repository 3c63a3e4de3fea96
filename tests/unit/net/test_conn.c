/* conn: the connection lifecycle against scripted peers over loopback TCP, with a toy line
 * protocol instead of HTTP and no Redis: an answer owed to a peer that reset is dropped and
 * the memory freed once; the parser waits while answers pile up unread; a peer that does not
 * read is closed by the write deadline, and the idle deadline starts only once the answer is
 * written; a half-closed peer still gets its answer; a drain answers requests on open
 * connections as their last, closes busy ones after that answer and resets idle ones after the
 * grace; unparsed input is bounded. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/conn.h"

/* --- a toy protocol: each "\n"-terminated line is a request --- */

enum mode { ANSWER_NOW, ANSWER_LATER };

static struct {
    enum mode mode;
    size_t answer_len;
    int requests, frees, emptied;
    conn *held; /* the connection whose answer is owed (ANSWER_LATER) */
    conn *last; /* the connection opened last */
} g;

static void answer(conn *c)
{
    buf *o = conn_output(c);
    for (size_t i = 0; i < g.answer_len; i++)
        buf_append(o, conn_last_answer(c) ? "L" : "a", 1);
}

static size_t t_feed(conn *c, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len && conn_may_parse(c)) {
        const char *nl = memchr(data + off, '\n', len - off);
        if (!nl)
            break; /* a partial line waits for the rest */
        off = (size_t)(nl - data) + 1;
        g.requests++;
        conn_hold(c);
        if (g.mode == ANSWER_LATER) {
            g.held = c;
        } else {
            answer(c);
            conn_answered(c);
        }
    }
    return off;
}

static void t_open(conn *c, bool over)
{
    (void)over;
    g.last = c;
}

static void t_free(conn *c)
{
    (void)c;
    g.frees++;
}

static bool t_mid(const conn *c)
{
    (void)c;
    return false;
}

static const conn_protocol proto = {
    .conn_size = sizeof(conn),
    .open = t_open,
    .feed = t_feed,
    .free = t_free,
    .mid_request = t_mid,
};

/* --- the loop, a listener, peers --- */

static uv_loop_t loop;
static uv_tcp_t listener;
static conn_set set;
static int port;

static void on_conn(uv_stream_t *l, int status)
{
    assert_int_equal(status, 0);
    assert_int_equal(conn_accept(&set, l), 0);
}

static void start(enum mode mode, size_t answer_len, conn_limits lim)
{
    memset(&g, 0, sizeof g);
    g.mode = mode;
    g.answer_len = answer_len;
    assert_int_equal(uv_loop_init(&loop), 0);
    conn_set_init(&set, &loop, &proto, &lim, NULL);
    uv_tcp_init(&loop, &listener);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    assert_int_equal(uv_tcp_bind(&listener, (struct sockaddr *)&a, 0), 0);
    /* Small kernel buffers on the service's side (accepted sockets inherit them), so that
     * what a peer does not read or what the service does not read shows in a few KiB. */
    uv_os_fd_t lfd;
    int small = 8192;
    assert_int_equal(uv_fileno((uv_handle_t *)&listener, &lfd), 0);
    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    setsockopt(lfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    assert_int_equal(uv_listen((uv_stream_t *)&listener, 16, on_conn), 0);
    struct sockaddr_in b;
    int blen = sizeof b;
    uv_tcp_getsockname(&listener, (struct sockaddr *)&b, &blen);
    port = ntohs(b.sin_port);
}

static conn_limits limits(void)
{
    return (conn_limits){.header_timeout_ms = 10000,
                         .idle_timeout_ms = 10000,
                         .write_timeout_ms = 10000,
                         .write_buffer_bytes = 64 * 1024,
                         .max_connections = 100};
}

static void pump(int ms)
{
    uint64_t end = uv_now(&loop) + (uint64_t)ms;
    for (int i = 0; i < 100000 && uv_now(&loop) < end; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
        uv_update_time(&loop);
    }
}

static void stop(void)
{
    conn_set_close_all(&set);
    conn_set_stop(&set);
    uv_close((uv_handle_t *)&listener, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(set.count, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static int peer(int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    pump(20); /* accepted */
    return fd;
}

static void send_all(int fd, const char *s, size_t len)
{
    size_t off = 0;
    for (int i = 0; off < len && i < 100000; i++) {
        ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else
            pump(1);
    }
    assert_int_equal(off, len);
}

/* Reads what is there; returns bytes read, -1 at EOF or reset. */
static ssize_t drain_peer(int fd, size_t *total, char *last)
{
    char tmp[65536];
    ssize_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            got += n;
            *total += (size_t)n;
            if (last)
                *last = tmp[n - 1];
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        return got;
    }
}

static bool peer_closed(int fd)
{
    size_t total = 0;
    return drain_peer(fd, &total, NULL) < 0;
}

static void reset_close(int fd)
{
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* --- tests --- */

static void test_answer_after_reset_is_dropped_and_memory_freed_once(void **state)
{
    (void)state;
    start(ANSWER_LATER, 10, limits());
    int fd = peer(0);
    send_all(fd, "get\n", 4);
    pump(50);
    assert_int_equal(g.requests, 1);
    conn *c = g.held;
    assert_non_null(c);
    reset_close(fd); /* the client goes while its answer is owed */
    pump(50);
    assert_int_equal(c->state, CONN_CLOSED);
    assert_int_equal(g.frees, 0); /* the owed answer holds the memory */
    answer(c);
    assert_false(conn_answered(c)); /* freed here: nothing may touch c now */
    assert_int_equal(g.frees, 1);
    assert_int_equal(set.count, 0);
    stop();
    assert_int_equal(g.frees, 1);
}

static void test_parser_waits_while_answers_pile_up_unread(void **state)
{
    (void)state;
    conn_limits lim = limits();
    const size_t answer_len = 100 * 1024;
    start(ANSWER_NOW, answer_len, lim);
    int fd = peer(4096);
    char lines[200];
    memset(lines, '\n', sizeof lines);
    send_all(fd, lines, sizeof lines); /* 200 pipelined requests, not read */
    size_t max_queued = 0;
    for (int i = 0; i < 50; i++) {
        pump(5);
        conn *c = g.last;
        size_t q = c->out.len + c->writing.len;
        max_queued = q > max_queued ? q : max_queued;
    }
    /* Parsing stops once the mark is reached: one answer may pass it, never two. */
    assert_true(g.requests < 200);
    assert_true(max_queued <= lim.write_buffer_bytes + answer_len);
    /* Reading resumes the parser: every request is answered, in full. */
    size_t total = 0;
    for (int i = 0; i < 20000 && total < 200 * answer_len; i++) {
        drain_peer(fd, &total, NULL);
        pump(1);
    }
    assert_int_equal(g.requests, 200);
    assert_int_equal(total, 200 * answer_len);
    close(fd);
    stop();
}

static void test_write_deadline_closes_a_peer_that_does_not_read(void **state)
{
    (void)state;
    conn_limits lim = limits();
    lim.write_timeout_ms = 300;
    start(ANSWER_NOW, 4 << 20, lim); /* more than the kernel buffers */
    int fd = peer(4096);
    send_all(fd, "get\n", 4);
    pump(150);
    assert_int_equal(set.count, 1);
    assert_true(g.last->write_active);
    pump(400);
    assert_int_equal(set.count, 0); /* closed and freed */
    assert_true(peer_closed(fd));
    close(fd);
    stop();
}

static void test_idle_deadline_starts_when_the_answer_is_written(void **state)
{
    (void)state;
    conn_limits lim = limits();
    lim.idle_timeout_ms = 300; /* far shorter than the write deadline */
    start(ANSWER_NOW, 4 << 20, lim);
    int fd = peer(4096);
    send_all(fd, "get\n", 4);
    /* The peer reads nothing: the write is stuck, the write deadline runs, the idle one not. */
    pump(700);
    assert_int_equal(set.count, 1);
    conn *c = g.last;
    assert_true(c->write_active);
    assert_int_equal(c->read_deadline, 0);
    /* The peer reads it all: the idle deadline starts once the last bytes are written. */
    uint64_t reading_from = uv_now(&loop);
    size_t total = 0;
    for (int i = 0; i < 20000 && total < (4u << 20); i++) {
        pump(1);
        drain_peer(fd, &total, NULL);
    }
    assert_int_equal(total, 4u << 20);
    assert_false(c->write_active);
    assert_true(c->read_deadline >= reading_from + 300);
    /* Open until then by the loop's clock (the sweep compares against the same clock). */
    for (int i = 0; i < 1000 && uv_now(&loop) + 5 < c->read_deadline; i++) {
        assert_int_equal(set.count, 1);
        pump(1);
    }
    pump(400); /* past it, and a sweep or more */
    assert_int_equal(set.count, 0);
    close(fd);
    stop();
}

static void test_half_closed_peer_gets_its_answer_then_eof(void **state)
{
    (void)state;
    start(ANSWER_LATER, 5, limits());
    int fd = peer(0);
    send_all(fd, "get\n", 4);
    shutdown(fd, SHUT_WR);
    pump(50);
    assert_non_null(g.held);
    assert_int_equal(g.held->state, CONN_OPEN);
    answer(g.held);
    assert_true(conn_answered(g.held));
    size_t total = 0;
    char last = 0;
    ssize_t r = 0;
    for (int i = 0; i < 200 && r >= 0; i++) {
        pump(2);
        r = drain_peer(fd, &total, &last);
    }
    assert_int_equal(total, 5);
    assert_int_equal(last, 'L'); /* it knew it was the last answer */
    assert_true(r < 0);          /* then the connection closed */
    close(fd);
    stop();
}

static void on_empty(conn_set *s)
{
    (void)s;
    g.emptied++;
}

static void test_drain_closes_busy_after_their_answer_and_idle_after_the_grace(void **state)
{
    (void)state;
    conn_limits lim = limits();
    lim.drain_idle_grace_ms = 300;
    start(ANSWER_LATER, 3, lim);
    int idle = peer(0);
    int busy = peer(0);
    send_all(busy, "get\n", 4);
    pump(50);
    assert_non_null(g.held);
    set.on_empty = on_empty;
    conn_set_drain(&set);
    /* Within the grace the idle connection stays open: a request may be on its way. */
    pump(150);
    assert_int_equal(set.count, 2);
    assert_false(peer_closed(idle));
    assert_true(conn_last_answer(g.held));
    answer(g.held);
    conn_answered(g.held);
    pump(50);
    assert_int_equal(set.count, 1);
    size_t total = 0;
    drain_peer(busy, &total, NULL);
    assert_int_equal(total, 3);
    /* Past the grace (and the next sweep) the idle one is reset, and the set is empty. */
    for (int i = 0; i < 100 && set.count; i++)
        pump(10);
    assert_int_equal(set.count, 0);
    assert_int_equal(g.emptied, 1);
    assert_true(peer_closed(idle));
    assert_int_equal(set.stats.drain_idle_resets, 1);
    close(idle);
    close(busy);
    stop();
}

static void test_drain_answers_a_request_on_an_idle_connection(void **state)
{
    (void)state;
    conn_limits lim = limits();
    lim.drain_idle_grace_ms = 10000;
    start(ANSWER_NOW, 3, lim);
    int fd = peer(0);
    set.on_empty = on_empty;
    conn_set_drain(&set);
    pump(50);
    assert_int_equal(set.count, 1);
    /* A request sent after the drain began: answered as the last one ("L"), then closed. */
    send_all(fd, "get\nget\n", 8);
    for (int i = 0; i < 100 && set.count; i++)
        pump(10);
    assert_int_equal(set.count, 0);
    assert_int_equal(g.emptied, 1);
    assert_int_equal(g.requests, 1);
    size_t total = 0;
    char last = 0;
    drain_peer(fd, &total, &last);
    assert_int_equal(total, 3);
    assert_int_equal(last, 'L');
    assert_int_equal(set.stats.drain_idle_resets, 0);
    close(fd);
    stop();
}

static void test_idle_connection_gives_its_buffers_back(void **state)
{
    (void)state;
    start(ANSWER_NOW, 3000, limits());
    int fd = peer(0);
    send_all(fd, "get\nge", 6); /* one request, and the start of the next */
    size_t total = 0;
    for (int i = 0; i < 100 && total < 3000; i++) {
        pump(2);
        drain_peer(fd, &total, NULL);
    }
    assert_int_equal(total, 3000);
    conn *c = g.last;
    assert_true(c->writing.cap + c->out.cap > 0);
    assert_true(c->pending_in.cap > 0);
    pump(350); /* several sweeps: a partial request keeps what it has read */
    assert_true(c->pending_in.cap > 0);
    send_all(fd, "t\n", 2);
    for (int i = 0; i < 100 && total < 6000; i++) {
        pump(2);
        drain_peer(fd, &total, NULL);
    }
    assert_int_equal(total, 6000);
    pump(350); /* idle now: the sweeps free every buffer */
    assert_int_equal(c->out.cap + c->writing.cap + c->pending_in.cap, 0);
    send_all(fd, "get\n", 4); /* and the next request still gets its answer */
    for (int i = 0; i < 100 && total < 9000; i++) {
        pump(2);
        drain_peer(fd, &total, NULL);
    }
    assert_int_equal(total, 9000);
    assert_int_equal(g.requests, 3);
    close(fd);
    stop();
}

static void test_unparsed_input_is_bounded(void **state)
{
    (void)state;
    start(ANSWER_NOW, 1, limits());
    int fd = peer(0);
    int small = 8192;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    /* One line that never ends: the parser keeps none of it, the connection only so much. */
    static char junk[1 << 20];
    memset(junk, 'x', sizeof junk);
    size_t sent = 0;
    for (int i = 0; i < 2000 && sent < sizeof junk; i++) {
        ssize_t n = send(fd, junk + sent, sizeof junk - sent, MSG_NOSIGNAL);
        if (n > 0)
            sent += (size_t)n;
        pump(1);
    }
    pump(50);
    assert_true(sent < sizeof junk); /* the service stopped reading */
    assert_true(g.last->pending_in.len <= 128 * 1024);
    assert_false(g.last->reading);
    close(fd);
    stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_after_reset_is_dropped_and_memory_freed_once),
        cmocka_unit_test(test_parser_waits_while_answers_pile_up_unread),
        cmocka_unit_test(test_write_deadline_closes_a_peer_that_does_not_read),
        cmocka_unit_test(test_idle_deadline_starts_when_the_answer_is_written),
        cmocka_unit_test(test_half_closed_peer_gets_its_answer_then_eof),
        cmocka_unit_test(test_drain_closes_busy_after_their_answer_and_idle_after_the_grace),
        cmocka_unit_test(test_drain_answers_a_request_on_an_idle_connection),
        cmocka_unit_test(test_unparsed_input_is_bounded),
        cmocka_unit_test(test_idle_connection_gives_its_buffers_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
