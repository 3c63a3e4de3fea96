/* server: the listening socket, open connections, their timers and writes, and the drain. */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "log.h"
#include "metrics.h"

/* Reads land here; whatever must outlive the callback is copied into the connection. */
static char read_buffer[64 * 1024];
static bool read_buffer_busy;

/* Stop reading from a client whose responses pile up unread, or who sends far ahead. */
#define OUT_HIGH_WATER (1u << 20)
#define IN_HIGH_WATER  (64u * 1024)
/* How often deadlines are checked: one timer for all connections instead of one each. */
#define SWEEP_MS 100

static void conn_free(conn *c)
{
    server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    metrics_connection_closed();
    http_conn_deinit(c);
    free(c);
    if (srv->draining && srv->nconns == 0 && srv->on_drained) {
        uv_timer_stop(&srv->drain_timer);
        uv_timer_stop(&srv->sweep_timer);
        void (*cb)(server *) = srv->on_drained;
        srv->on_drained = NULL;
        cb(srv);
    }
}

/* Frees the connection once its socket is closed and no answer is still owed to it. */
static void conn_release(conn *c)
{
    if (c->tcp_closed && !c->in_request)
        conn_free(c);
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn *c = h->data;
    c->tcp_closed = true;
    conn_release(c);
}

void server_conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->reading = false;
    c->deadline = 0;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
}

void server_conn_timer(conn *c, uint64_t ms)
{
    if (!c->closing)
        c->deadline = uv_now(c->srv->app->loop) + ms;
}

void server_conn_timer_stop(conn *c)
{
    c->deadline = 0;
}

static void on_sweep(uv_timer_t *t)
{
    server *srv = t->data;
    uint64_t now = uv_now(srv->app->loop);
    conn *next;
    for (conn *c = srv->conns; c; c = next) {
        next = c->next;
        /* An answer still owed has its own deadline (the Redis timeout); wait for it. */
        if (c->deadline && now >= c->deadline && !c->in_request)
            server_conn_close(c);
    }
}

static void on_write(uv_write_t *w, int status)
{
    conn *c = w->data;
    c->write_active = false;
    buf_reset(&c->writing, 64 * 1024);
    if (status < 0) {
        server_conn_close(c);
        conn_release(c);
        return;
    }
    server_conn_flush(c);
    server_conn_reading(c);
    /* A released conn may be freed in flush; nothing touches c after this point. */
}

static bool conn_idle(const conn *c)
{
    return !c->in_request && !c->in_message && !c->write_active && c->out.len == 0 &&
           c->pending_in.len == 0;
}

void server_conn_flush(conn *c)
{
    if (c->closing) {
        conn_release(c);
        return;
    }
    if (!c->write_active && c->out.len) {
        /* Swap so the kernel gets everything queued so far in one write. */
        buf tmp = c->writing;
        c->writing = c->out;
        c->out = tmp;
        uv_buf_t b = uv_buf_init(c->writing.data, (unsigned)c->writing.len);
        c->wreq.data = c;
        int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
        if (rc < 0) {
            server_conn_close(c);
            return;
        }
        c->write_active = true;
        return;
    }
    if (c->write_active)
        return;
    if (c->close_after && !c->in_request) {
        server_conn_close(c);
        return;
    }
    if (conn_idle(c)) {
        if (c->srv->draining) {
            server_conn_close(c);
            return;
        }
        server_conn_timer(c, (uint64_t)c->srv->app->cfg.idle_timeout_ms);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    if (read_buffer_busy) {
        *b = uv_buf_init(NULL, 0);
        return;
    }
    read_buffer_busy = true;
    *b = uv_buf_init(read_buffer, sizeof read_buffer);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn *c = s->data;
    if (b->base == read_buffer)
        read_buffer_busy = false;
    if (n == UV_EOF) {
        /* The client is done sending; what it sent is still answered, then the conn closes. */
        uv_read_stop(s);
        c->reading = false;
        c->eof = true;
        http_conn_feed(c, NULL, 0);
        return;
    }
    if (n < 0) {
        /* The connection failed. An answer still owed is dropped when it arrives. */
        uv_read_stop(s);
        c->reading = false;
        server_conn_close(c);
        return;
    }
    if (n > 0)
        http_conn_feed(c, b->base, (size_t)n);
}

void server_conn_reading(conn *c)
{
    /* Reading goes on while a request is answered (pipelined bytes wait in pending_in): toggling
     * it would cost two epoll_ctl calls per request. */
    bool want = !c->closing && !c->close_after && !c->eof && c->pending_in.len < IN_HIGH_WATER &&
                c->out.len + c->writing.len < OUT_HIGH_WATER;
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* A connection linked into the server's list, its handle initialised but not yet attached to a
 * socket. Owned by the server's list until conn_free. */
static conn *conn_new(server *srv)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = srv;
    uv_tcp_init(srv->app->loop, &c->tcp);
    c->tcp.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    metrics_connection_opened();
    return c;
}

/* Everything after the socket is attached: the parser, the cap, the first deadline. */
static void conn_start(conn *c)
{
    server *srv = c->srv;
    http_conn_init(c);
    if (srv->nconns > (size_t)srv->app->cfg.max_connections) {
        c->close_after = true;
        c->in_request = true;
        metrics_connection_rejected();
        request_fail(&c->req, 503, "unavailable", "Too many connections; try again shortly.", NULL);
        return;
    }
    /* A new connection must deliver its first header block in time, like any request. */
    server_conn_timer(c, (uint64_t)srv->app->cfg.header_timeout_ms);
    server_conn_reading(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    server *srv = listener->data;
    if (status < 0) {
        log_event(LOG_WARN, "accept failed", uv_strerror(status));
        return;
    }
    conn *c = conn_new(srv);
    if (!c)
        return;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        server_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    conn_start(c);
}

conn *server_conn_open_fd(server *srv, uv_os_sock_t fd)
{
    conn *c = conn_new(srv);
    if (!c)
        return NULL;
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        server_conn_close(c);
        return NULL;
    }
    conn_start(c);
    return c;
}

int server_start(server *srv, app *a)
{
    srv->app = a;
    uv_tcp_init(a->loop, &srv->listener);
    uv_timer_init(a->loop, &srv->drain_timer);
    uv_timer_init(a->loop, &srv->sweep_timer);
    srv->listener.data = srv->drain_timer.data = srv->sweep_timer.data = srv;
    uv_timer_start(&srv->sweep_timer, on_sweep, SWEEP_MS, SWEEP_MS);
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(a->cfg.host, (int)a->cfg.port, (struct sockaddr_in *)&addr);
    if (rc != 0)
        rc = uv_ip6_addr(a->cfg.host, (int)a->cfg.port, (struct sockaddr_in6 *)&addr);
    if (rc != 0)
        return rc;
    rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
    if (rc != 0)
        return rc;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    return 0;
}

static void on_drain_timeout(uv_timer_t *t)
{
    server *srv = t->data;
    log_event(LOG_WARN, "shutdown timeout: closing connections with requests in flight", NULL);
    for (conn *c = srv->conns; c; c = c->next)
        server_conn_close(c);
    /* Answers still owed are failed by the store as it closes; their conns are freed then. */
    uv_timer_stop(&srv->sweep_timer);
    if (srv->on_drained) {
        void (*cb)(server *) = srv->on_drained;
        srv->on_drained = NULL;
        cb(srv);
    }
}

void server_drain(server *srv)
{
    if (srv->draining)
        return;
    srv->draining = 1;
    uv_close((uv_handle_t *)&srv->listener, NULL);
    /* Idle connections go now; the others close after their current answer (request.c marks
     * answers given while draining Connection: close). */
    conn *next;
    for (conn *c = srv->conns; c; c = next) {
        next = c->next;
        if (conn_idle(c))
            server_conn_close(c);
    }
    if (srv->nconns == 0) {
        uv_timer_stop(&srv->sweep_timer);
        if (srv->on_drained) {
            void (*cb)(server *) = srv->on_drained;
            srv->on_drained = NULL;
            cb(srv);
        }
        return;
    }
    uv_timer_start(&srv->drain_timer, on_drain_timeout, (uint64_t)srv->app->cfg.shutdown_timeout_ms,
                   0);
}
