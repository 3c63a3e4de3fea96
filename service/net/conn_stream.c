/* conn_stream: a streamed answer's queue of shared chunks (conn.h, conn_stream_*): what it
 * holds, what the kernel took, its bound, and its end from above or below. */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "net/conn_int.h"
#include "net/sendpool.h"

/* Chunks one write hands the kernel at most. */
#define STREAM_IOV 64
/* Chunks a shared write (conn_stream_flush_all) hands it at most: what it leaves goes as a
 * lone flush writes. */
#define SHARED_IOV 8

void (*conn_stream_sent_hook)(const out_chunk *ch);

static void stream_free(conn_stream *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        chunk_unref(s->q[(s->head + i) & (s->cap - 1)]);
    free(s->q);
    free(s);
}

static void stream_gone(conn *c)
{
    conn_stream *s = c->stream;
    if (!s || !s->ended)
        return;
    conn_stream_ended fn = s->ended;
    s->ended = NULL;
    c->owed = false;
    fn(s->data);
}

/* n bytes from the queue's head are with the kernel. */
static void stream_consume(conn_stream *s, size_t n)
{
    while (n && s->n) {
        out_chunk *ch = s->q[s->head];
        size_t left = ch->len - s->off;
        if (n < left) {
            s->off += n;
            s->behind -= n;
            return;
        }
        n -= left;
        s->behind -= left;
        s->off = 0;
        s->head = (s->head + 1) & (s->cap - 1);
        s->n--;
        if (conn_stream_sent_hook)
            conn_stream_sent_hook(ch);
        chunk_unref(ch);
    }
}

/* The queue's first chunks as iovecs (the first from off); how many. */
static size_t stream_iov(const conn_stream *s, struct iovec *iov, size_t max)
{
    size_t k = 0;
    for (; k < s->n && k < max; k++) {
        out_chunk *ch = s->q[(s->head + k) & (s->cap - 1)];
        size_t off = k ? 0 : s->off;
        iov[k] = (struct iovec){ch->data + off, ch->len - off};
    }
    return k;
}

/* A stream's queue to the kernel: one sendmsg of what it takes now, the rest by uv_write (the
 * chunks stay referenced until its callback). */
static void stream_flush(conn *c)
{
    conn_stream *s = c->stream;
    if (!s || s->n == 0 || c->write_active || c->state >= CONN_CLOSING)
        return;
    struct iovec iov[STREAM_IOV];
    size_t k = stream_iov(s, iov, STREAM_IOV);
    ssize_t n = 0;
    if (c->fd >= 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = k};
        do
            n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            conn_close(c);
            return;
        }
        if (n < 0)
            n = 0;
    }
    stream_consume(s, (size_t)n);
    if (s->n == 0)
        return;
    uv_buf_t b[STREAM_IOV];
    k = stream_iov(s, iov, STREAM_IOV);
    for (size_t i = 0; i < k; i++)
        b[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, b, (unsigned)k, conn_on_write) < 0) {
        conn_close(c);
        return;
    }
    s->in_write = k;
    c->write_active = true;
    c->write_deadline = conn_fresh_ms(c) + c->set->limits.write_timeout_ms;
}

static void stream_written(conn *c, int status)
{
    conn_stream *s = c->stream;
    if (s && s->in_write && status == 0) {
        /* uv_write wrote every byte of its chunks: the first from off, the rest whole. */
        size_t bytes = 0;
        for (size_t i = 0; i < s->in_write; i++)
            bytes += s->q[(s->head + i) & (s->cap - 1)]->len;
        stream_consume(s, bytes - s->off);
    }
    if (s)
        s->in_write = 0;
}

static void stream_drain(conn *c);
static void stream_trim(conn *c);

static const conn_stream_ops stream_ops = {
    .free = stream_free,
    .gone = stream_gone,
    .flush = stream_flush,
    .written = stream_written,
    .drain = stream_drain,
    .trim = stream_trim,
};

int conn_stream_start(conn *c, size_t max_behind, conn_stream_ended ended, void *data)
{
    conn_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->ops = &stream_ops;
    s->max_behind = max_behind;
    s->ended = ended;
    s->data = data;
    c->stream = s;
    return 0;
}

bool conn_stream_queue(conn *c, out_chunk *ch)
{
    conn_stream *s = c->stream;
    if (!s || !s->ended)
        return false;
    if (s->behind + ch->len > s->max_behind) {
        /* A reset, as for a client not reading past its write deadline: a FIN would wait
         * behind what the kernel still holds for it. */
        conn_close_socket(c, true);
        return false;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        out_chunk **q = malloc(cap * sizeof *q);
        if (!q) {
            conn_close_socket(c, true);
            return false;
        }
        for (size_t i = 0; i < s->n; i++)
            q[i] = s->q[(s->head + i) & (s->cap - 1)];
        free(s->q);
        s->q = q;
        s->cap = cap;
        s->head = 0;
    }
    s->q[(s->head + s->n) & (s->cap - 1)] = chunk_ref(ch);
    s->n++;
    s->behind += ch->len;
    return true;
}

bool conn_stream_push(conn *c, out_chunk *ch)
{
    if (!conn_stream_queue(c, ch))
        return false;
    conn_progress(c);
    return c->stream->ended != NULL;
}

/* The shared write's arrays, grown to the largest fan-out seen (loop thread only). */
static sendpool_job *shared_jobs;
static conn **shared_who;
static struct iovec *shared_iov;
static size_t shared_cap;

static bool shared_reserve(size_t n)
{
    if (n <= shared_cap)
        return true;
    size_t cap = shared_cap ? shared_cap : 256;
    while (cap < n)
        cap *= 2;
    sendpool_job *j = realloc(shared_jobs, cap * sizeof *j);
    if (j)
        shared_jobs = j;
    conn **w = realloc(shared_who, cap * sizeof *w);
    if (w)
        shared_who = w;
    struct iovec *v = realloc(shared_iov, cap * SHARED_IOV * sizeof *v);
    if (v)
        shared_iov = v;
    if (!j || !w || !v)
        return false;
    shared_cap = cap;
    return true;
}

void conn_stream_flush_all(sendpool *p, conn **cs, size_t n)
{
    /* The arrays are one call's: a call made while they are in use (a close's consequences
     * reaching another fan-out) writes as lone flushes. */
    static bool shared_busy;
    size_t k = 0;
    bool mine = !shared_busy;
    shared_busy = true;
    if (mine && shared_reserve(n))
        for (size_t i = 0; i < n; i++) {
            conn *c = cs[i];
            conn_stream *s = c->stream;
            /* As stream_flush would write now; a connection whose progress is on the stack
             * writes when it returns there. */
            if (!s || s->n == 0 || c->write_active || c->state >= CONN_CLOSING || c->fd < 0 ||
                c->in_progress)
                continue;
            struct iovec *iov = shared_iov + k * SHARED_IOV;
            shared_jobs[k] = (sendpool_job){
                .fd = c->fd,
                .m = {.msg_iov = iov, .msg_iovlen = stream_iov(s, iov, SHARED_IOV)},
            };
            shared_who[k++] = c;
        }
    sendpool_run(p, shared_jobs, k);
    for (size_t j = 0; j < k; j++) {
        conn *c = shared_who[j];
        if (shared_jobs[j].res >= 0)
            stream_consume(c->stream, (size_t)shared_jobs[j].res);
        else if (shared_jobs[j].err != EAGAIN && shared_jobs[j].err != EWOULDBLOCK)
            conn_close(c);
    }
    if (mine)
        shared_busy = false;
    /* What is left (more than the shared write took, or all of a connection it skipped) goes
     * as any flush. */
    for (size_t i = 0; i < n; i++)
        conn_progress(cs[i]);
}

size_t conn_stream_behind(const conn *c)
{
    return c->stream ? c->stream->behind : 0;
}

void conn_stream_finish(conn *c)
{
    if (!c->stream || !c->stream->ended)
        return;
    c->stream->ended = NULL;
    conn_finish_input(c);
    conn_answered(c);
}

static void stream_drain(conn *c)
{
    if (!c->stream || !c->stream->ended)
        return;
    conn_finish_input(c);
    stream_gone(c);
}

static void stream_trim(conn *c)
{
    if (c->stream && !c->write_active && !c->out.len && !c->pending_in.len)
        conn_give_back(c);
}
