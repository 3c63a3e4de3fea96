/* conn: one client socket's life: reading, queued output, deadlines, and when its memory goes.
 * The state diagram is in conn.h. */
#define _GNU_SOURCE /* accept4 */
#include "net/conn.h"
#include "net/conn_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/metrics.h"

/* Reads land here; what must outlive the callback is copied into pending_in. */
static char read_buffer[64 * 1024];
static bool read_buffer_busy;

/* Pipelined bytes kept unparsed beyond this stop the reading (the parser is paused then). */
#define IN_HIGH_WATER (64u * 1024)
/* How often deadlines are checked: one timer for all connections instead of one each. */
#define SWEEP_MS 100
/* A buffer that grew for one large answer is given back beyond this. */
#define KEEP_BYTES (64u * 1024)

/* The loop's clock is read once per iteration; one iteration of a loaded loop can take a good
 * part of a second, so a deadline that starts at an event inside it reads the clock again
 * (a vDSO call). The sweep compares against the same clock. */
uint64_t conn_fresh_ms(const conn *c)
{
    uv_update_time(c->set->loop);
    return uv_now(c->set->loop);
}

/* The one place a connection's memory goes: the socket is closed and no answer is owed. */
static void conn_free(conn *c)
{
    conn_set *set = c->set;
    if (c->prev)
        c->prev->next = c->next;
    else
        set->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    set->count--;
    set->stats.open--;
    set->proto->free(c);
    buf_free(&c->pending_in);
    buf_free(&c->out);
    buf_free(&c->writing);
    if (c->stream)
        c->stream->ops->free(c->stream);
    free(c);
    if (set->draining && set->count == 0 && set->on_empty) {
        void (*cb)(conn_set *) = set->on_empty;
        set->on_empty = NULL;
        cb(set);
    }
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn *c = h->data;
    c->state = CONN_CLOSED;
    if (!c->owed)
        conn_free(c);
}

void conn_close_socket(conn *c, bool reset)
{
    if (c->state >= CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    c->reading = false;
    c->read_deadline = c->write_deadline = 0;
    if (!reset || uv_tcp_close_reset(&c->tcp, on_tcp_closed) != 0)
        uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
    if (c->stream)
        c->stream->ops->gone(c);
}

void conn_close(conn *c)
{
    conn_close_socket(c, false);
}

void conn_read_deadline(conn *c, uint64_t ms)
{
    c->read_deadline = (ms && c->state < CONN_CLOSING) ? conn_fresh_ms(c) + ms : 0;
}

/* The idle deadline starts when the last answer is fully written (handed to the kernel), as
 * docs/DECISIONS.md says: not while a request is dispatched, an answer is queued or being
 * written (the write deadline runs then), nor once the next request has begun (its header or
 * body deadline runs). Called wherever the output may just have emptied. */
static void idle_from_now(conn *c)
{
    if (c->state != CONN_OPEN || c->owed || c->write_active || c->out.len || c->pending_in.len ||
        c->set->proto->mid_request(c))
        return;
    conn_read_deadline(c, c->set->limits.idle_timeout_ms);
}

bool conn_accepts_output(const conn *c)
{
    return c->state == CONN_OPEN || c->state == CONN_DRAINING;
}

bool conn_last_answer(const conn *c)
{
    /* After the client's EOF, once nothing unparsed is left, no request can follow. */
    return c->state != CONN_OPEN || c->set->draining || (c->eof && c->pending_in.len == 0);
}

bool conn_wants_input(const conn *c)
{
    return c->reading && c->state == CONN_OPEN;
}

bool conn_alive(const conn_set *set, const conn *c)
{
    for (const conn *p = set->head; p; p = p->next)
        if (p == c)
            return true;
    return false;
}

static size_t queued(const conn *c)
{
    return c->out.len + c->writing.len + (c->stream ? c->stream->behind : 0);
}

/* The parser runs only when its answer could be queued without passing the high-water mark. */
bool conn_may_parse(const conn *c)
{
    return c->state == CONN_OPEN && !c->owed && queued(c) < c->set->limits.write_buffer_bytes;
}

void conn_hold(conn *c)
{
    c->owed = true;
    /* While Redis works on the answer its own deadline runs; the client's is paused. */
    c->read_deadline = 0;
}

void conn_finish_input(conn *c)
{
    /* pending_in may be under the parser right now: it is dropped once the parser returns. */
    if (c->state == CONN_OPEN)
        c->state = CONN_DRAINING;
}

/* One send(2) of what fits the socket's buffer now: bytes sent, 0 if none fit, or a negative
 * libuv error. send goes to the socket without the file layer write(2) (uv_try_write's path)
 * passes through: vfs_write and sock_write_iter were 1.7% of entityd's CPU on a cached read
 * in a perf profile. */
static ssize_t send_now(conn *c, const char *data, size_t len)
{
    if (c->fd < 0) {
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        return n == UV_EAGAIN ? 0 : n;
    }
    for (;;) {
        ssize_t n = send(c->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : uv_translate_sys_error(errno);
    }
}

/* Hands everything queued so far to the kernel in one write. Called only from conn_progress. */
static void flush(conn *c)
{
    if (c->write_active || !conn_accepts_output(c))
        return;
    if (c->out.len == 0) {
        if (c->stream)
            c->stream->ops->flush(c);
        return;
    }
    buf tmp = c->writing;
    c->writing = c->out;
    c->out = tmp;
    /* Most answers fit the socket's buffer: written here, with no write request. A finished
     * uv_write stops the POLLOUT watch it never started, and libuv turns that into one
     * epoll_ctl per answer; the direct write costs the one send(2) alone. */
    ssize_t n = send_now(c, c->writing.data, c->writing.len);
    if (n == (ssize_t)c->writing.len) {
        buf_reset(&c->writing, KEEP_BYTES);
        if (c->pending_in.len)
            c->again = true; /* room again under the high-water mark: parse on */
        idle_from_now(c);
        if (c->stream)
            c->stream->ops->flush(c);
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->writing.data + n, (unsigned)(c->writing.len - (size_t)n));
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, conn_on_write) < 0) {
        conn_close(c);
        return;
    }
    c->write_active = true;
    c->write_deadline = conn_fresh_ms(c) + c->set->limits.write_timeout_ms;
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

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void set_reading(conn *c)
{
    bool want = c->state == CONN_OPEN && !c->eof && c->pending_in.len < IN_HIGH_WATER;
    /* Reading goes on while an answer is owed (the next request waits in pending_in): toggling
     * it per request would cost two epoll_ctl calls. */
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* Parses what waits in pending_in for as long as the state allows. */
static void parse_pending(conn *c)
{
    while (c->pending_in.len && conn_may_parse(c)) {
        size_t off = c->set->proto->feed(c, c->pending_in.data, c->pending_in.len);
        if (off == 0)
            break;
        buf_consume(&c->pending_in, off);
    }
    if (c->state != CONN_OPEN || (c->pending_in.len == 0 && c->pending_in.cap > KEEP_BYTES))
        buf_reset(&c->pending_in, KEEP_BYTES);
}

void conn_progress(conn *c)
{
    if (c->in_progress) {
        c->again = true; /* the call on the stack loops once more */
        return;
    }
    c->in_progress = true;
    do {
        c->again = false;
        if (c->state >= CONN_CLOSING)
            break;
        parse_pending(c);
        if (c->state >= CONN_CLOSING)
            break;
        /* After EOF nothing more arrives: once all of it is parsed and answered, drain. (A
         * server's drain does not end an idle connection here: a request may be on its way;
         * the sweep resets it after the grace.) */
        if (c->state == CONN_OPEN && !c->owed && conn_may_parse(c) && c->eof)
            conn_finish_input(c);
        /* A stream's client that half-closes is gone: it never sends a request again. */
        if (c->stream && c->stream->ended && c->eof) {
            conn_close_socket(c, false);
            break;
        }
        flush(c);
        if (c->state == CONN_DRAINING && !c->owed && !c->write_active && c->out.len == 0 &&
            !(c->stream && c->stream->n)) {
            conn_close(c);
            break;
        }
        if (c->state >= CONN_CLOSING)
            break;
        set_reading(c);
    } while (c->again);
    c->in_progress = false;
}

bool conn_answered(conn *c)
{
    bool empty = c->out.len == 0 && !c->write_active; /* nothing for flush to write */
    c->owed = false;
    if (c->state == CONN_CLOSED) {
        conn_free(c); /* the client went away while the answer was owed */
        return false;
    }
    if (c->state == CONN_CLOSING)
        return true;
    if (c->set->draining)
        conn_finish_input(c);
    conn_progress(c); /* writes the answer: the idle deadline starts once it is all written */
    if (empty)
        idle_from_now(c); /* an empty answer: nothing to wait for */
    return true;
}

void conn_on_write(uv_write_t *w, int status)
{
    conn *c = w->data;
    c->write_active = false;
    c->write_deadline = 0;
    buf_reset(&c->writing, KEEP_BYTES);
    if (c->stream)
        c->stream->ops->written(c, status);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->out.len == 0)
        idle_from_now(c); /* the last answer's final bytes are with the kernel */
    conn_progress(c);
}

void conn_received(conn *c, const char *data, size_t len)
{
    if (len == 0 || c->state != CONN_OPEN)
        return;
    c->active = true;
    if (c->pending_in.len == 0 && conn_may_parse(c)) {
        /* The common case: parsed straight from the read buffer, no copy. */
        c->in_progress = true;
        size_t off = c->set->proto->feed(c, data, len);
        c->in_progress = false;
        data += off;
        len -= off;
    }
    if (len && c->state == CONN_OPEN)
        buf_append(&c->pending_in, data, len);
    conn_progress(c);
}

void conn_received_eof(conn *c)
{
    /* What the client sent before its EOF is still answered, then the connection closes. */
    c->eof = true;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    conn_progress(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn *c = s->data;
    if (b->base == read_buffer)
        read_buffer_busy = false;
    if (n == UV_EOF)
        conn_received_eof(c);
    else if (n < 0)
        conn_close(c); /* an answer still owed is dropped when it arrives */
    else
        conn_received(c, b->base, (size_t)n);
}

/* --- the set --- */

/* Open, nothing owed, queued, unparsed or begun: between two requests. */
static bool idle(const conn *c)
{
    return c->state == CONN_OPEN && !c->owed && !c->write_active && !c->out.len &&
           !c->pending_in.len && !c->set->proto->mid_request(c);
}

/* An idle keep-alive connection keeps only its struct: a connection that read nothing for a
 * whole sweep gives its buffers back; the next request allocates them again. */
void conn_give_back(conn *c)
{
    buf_free(&c->out);
    buf_free(&c->writing);
    buf_free(&c->pending_in);
    if (c->set->proto->trim)
        c->set->proto->trim(c);
}

static void trim(conn *c)
{
    if (idle(c))
        conn_give_back(c);
}

/* Bytes in the socket that libuv has not read yet: a request the client sent before it could
 * know of a close. Closing now would reset it unanswered; it is read and answered instead. */
static bool bytes_waiting(const conn *c)
{
    char b;
    if (c->fd < 0)
        return false;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0;
}

static void on_sweep(uv_timer_t *t)
{
    conn_set *set = t->data;
    uint64_t now = uv_now(set->loop);
    for (conn *c = set->head; c; c = c->next) {
        if (c->state >= CONN_CLOSING)
            continue;
        /* A client that stopped reading gets a reset: a FIN would wait behind the unread
         * answers, and the kernel would keep them buffered for minutes. */
        if (c->write_deadline && now >= c->write_deadline) {
            set->stats.write_timeouts++;
            conn_close_socket(c, true);
        } else if (c->read_deadline && now >= c->read_deadline && !c->owed) {
            /* A header or body deadline (the idle one never runs during a write). */
            set->stats.read_timeouts++;
            conn_close_socket(c, c->write_active);
        } else if (set->draining && now >= set->drain_idle_at && idle(c) && !bytes_waiting(c)) {
            /* A reset rather than a FIN: a gateway about to reuse the connection tests for a
             * pending socket error before it writes (nginx's ngx_http_upstream_test_connect)
             * and sends the request elsewhere; after a FIN it would write, read an EOF and
             * fail the request (a POST is not retried). */
            set->stats.drain_idle_resets++;
            conn_close_socket(c, true);
        } else if (!c->active) {
            trim(c);
            if (c->stream)
                c->stream->ops->trim(c);
        }
        c->active = false;
    }
}

void conn_set_init(conn_set *set, uv_loop_t *loop, const conn_protocol *proto,
                   const conn_limits *limits, void *ctx)
{
    memset(set, 0, sizeof *set);
    set->ctx = ctx;
    set->loop = loop;
    set->proto = proto;
    set->limits = *limits;
    uv_timer_init(loop, &set->sweep);
    set->sweep.data = set;
    uv_timer_start(&set->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
}

/* A connection in the set, its handle initialised but not yet attached to a socket. */
static conn *conn_new(conn_set *set)
{
    conn *c = calloc(1, set->proto->conn_size);
    if (!c)
        return NULL;
    c->set = set;
    c->state = CONN_OPEN;
    c->fd = -1;
    uv_tcp_init(set->loop, &c->tcp);
    c->tcp.data = c;
    c->next = set->head;
    if (set->head)
        set->head->prev = c;
    set->head = c;
    set->count++;
    set->stats.opened++;
    set->stats.open++;
    return c;
}

static void conn_note_fd(conn *c)
{
    uv_os_fd_t fd;
    c->fd = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? fd : -1;
}

static void conn_start(conn *c)
{
    /* Not refused while draining: the connections a drain takes from the accept queue
     * (conn_accept_waiting) may carry a request already, which a refusal would fail. */
    bool over = c->set->count > c->set->limits.max_connections;
    if (over)
        c->set->stats.rejected++;
    /* A new connection must deliver its first header block in time, like any request. */
    conn_read_deadline(c, c->set->limits.header_timeout_ms);
    c->set->proto->open(c, over);
    conn_progress(c);
}

/* A client's socket as the server tunes it, then served. */
static void conn_start_client(conn *c)
{
    conn_note_fd(c);
    uv_tcp_nodelay(&c->tcp, 1);
    /* The kernel's share of a client's unread answers is bounded too (Linux autotunes it up
     * to megabytes): a client that stops reading fills it soon, its write deadline starts
     * running, and a thousand such clients cannot pin gigabytes of kernel memory. */
    int sndbuf = (int)c->set->limits.write_buffer_bytes;
    uv_send_buffer_size((uv_handle_t *)&c->tcp, &sndbuf);
    conn_start(c);
}

int conn_accept(conn_set *set, uv_stream_t *listener)
{
    conn *c = conn_new(set);
    if (!c)
        return UV_ENOMEM;
    int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc != 0) {
        conn_close(c);
        return rc;
    }
    conn_start_client(c);
    return 0;
}

size_t conn_accept_waiting(conn_set *set, uv_tcp_t *listener)
{
    uv_os_fd_t lfd;
    size_t n = 0;
    if (uv_fileno((uv_handle_t *)listener, &lfd) != 0)
        return 0;
    /* libuv's uv_accept takes only the one connection its callback announces: the queue is
     * read here directly. Bounded by the queue's length (the listen backlog). */
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break;
        }
        conn *c = conn_new(set);
        if (!c || uv_tcp_open(&c->tcp, fd) != 0) {
            if (c)
                conn_close(c);
            close(fd);
            continue;
        }
        conn_start_client(c);
        n++;
    }
    return n;
}

conn *conn_open_fd(conn_set *set, uv_os_sock_t fd)
{
    conn *c = conn_new(set);
    if (!c)
        return NULL;
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        conn_close(c);
        return NULL;
    }
    conn_note_fd(c);
    conn_start(c);
    return c;
}

void conn_set_drain(conn_set *set)
{
    set->draining = true;
    uv_update_time(set->loop);
    set->drain_idle_at = uv_now(set->loop) + set->limits.drain_idle_grace_ms;
    for (conn *c = set->head; c; c = c->next) {
        if (c->stream)
            c->stream->ops->drain(c);
        conn_progress(c); /* closes none synchronously: the list stays intact */
    }
    if (set->count == 0 && set->on_empty) {
        void (*cb)(conn_set *) = set->on_empty;
        set->on_empty = NULL;
        cb(set);
    }
}

void conn_set_close_all(conn_set *set)
{
    for (conn *c = set->head; c; c = c->next)
        conn_close(c);
}

void conn_set_stop(conn_set *set)
{
    uv_timer_stop(&set->sweep);
    if (!uv_is_closing((uv_handle_t *)&set->sweep))
        uv_close((uv_handle_t *)&set->sweep, NULL);
}

void conn_set_render_metrics(buf *out, void *ctx)
{
    const conn_set_stats *st = &((conn_set *)ctx)->stats;
    metrics_gauge(out, "entityd_http_connections_open", "Client connections open now.",
                  (double)st->open);
    metrics_counter(out, "entityd_http_connections_total", "Client connections accepted.",
                    st->opened);
    metrics_counter(out, "entityd_http_connections_rejected_total",
                    "Connections answered 503 for being over MAX_CONNECTIONS.", st->rejected);
    metrics_family(out, "entityd_http_connections_timed_out_total", "counter",
                   "Connections closed for a deadline: read (header, body, idle) or write (a "
                   "client not reading).");
    buf_printf(out, "entityd_http_connections_timed_out_total{deadline=\"read\"} %llu\n",
               (unsigned long long)st->read_timeouts);
    buf_printf(out, "entityd_http_connections_timed_out_total{deadline=\"write\"} %llu\n",
               (unsigned long long)st->write_timeouts);
    metrics_counter(out, "entityd_http_drain_idle_resets_total",
                    "Connections a drain reset for staying idle past SHUTDOWN_IDLE_GRACE_MS.",
                    st->drain_idle_resets);
}
