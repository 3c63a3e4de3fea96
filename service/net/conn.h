/* conn: one client socket's life: reading, queued output, deadlines, and when its memory goes.
 *
 * A connection is in exactly one state; only conn.c changes it:
 *
 *   OPEN ──── client EOF with nothing left to answer, a last request (Connection: close),
 *    │        a protocol error, or an answer given while the server drains ─┐
 *    │  reads; the protocol parses one request at a time and the           v
 *    │  parser waits while an answer is owed or WRITE_BUFFER_BYTES      DRAINING
 *    │  of answers are queued                                  reads nothing more; writes what
 *    │                                                         is queued and owed, then closes
 *    │ read error, write error or timeout, a deadline passed          │
 *    v                                                                 │
 *   CLOSING <──────────────────────────────────────────────────────────┘
 *    │  uv_close called: nothing is read or written any more
 *    v  libuv's close callback
 *   CLOSED ── memory freed at once, or when the answer still owed arrives (and is dropped)
 *
 * Deadlines (checked by one sweep every 100 ms, so a close comes up to a sweep late):
 *   header  from the accept, and from a request's first byte, until its header block is in;
 *   body    from the end of the header block (IDLE_TIMEOUT_MS) until the request is complete;
 *   idle    from the moment the last answer is fully written (handed to the kernel) until the
 *           next request's first byte: never while a request is dispatched, an answer is
 *           queued or being written, as nginx's keepalive_timeout;
 *   write   from the start of a write the socket did not take at once, until it completes.
 * None runs while an answer is owed: Redis has its own deadline then.
 * While the server drains, an open connection still idle drain_idle_grace_ms after the drain
 * began is reset by the sweep, unless bytes wait in its socket (docs/OPERATIONS.md says why).
 *
 * Beside the state, a dispatched request holds the connection (conn_hold) until its answer is
 * queued (conn_answered): that hold, and the socket until its close callback, are the two
 * things that keep the memory. The set owns every connection's memory and frees it in exactly
 * one place; conn_answered is the only call a caller makes that may free (it says so), and
 * every other call leaves the connection valid until the event loop runs again. */
#ifndef ENTITYD_CONN_H
#define ENTITYD_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "net/chunk.h"

enum conn_state { CONN_OPEN, CONN_DRAINING, CONN_CLOSING, CONN_CLOSED };

struct conn;
struct conn_set;
struct conn_stream;
struct sendpool;

/* What a protocol provides: the connection layer knows bytes, never requests. */
typedef struct conn_protocol {
    size_t conn_size; /* bytes to allocate per connection: the protocol's struct, conn first */
    /* A new connection; over_capacity: answer it a refusal and finish its input. */
    void (*open)(struct conn *c, bool over_capacity);
    /* Parses; returns how many bytes it consumed. Called only while the connection is open,
     * no answer is owed, and the queued output is under the high-water mark; it stops by
     * itself when it dispatches a request (conn_hold) or finishes the input. */
    size_t (*feed)(struct conn *c, const char *data, size_t len);
    void (*free)(struct conn *c); /* releases the protocol's state; the memory is the set's */
    /* A request has begun to arrive: a drain lets it finish instead of closing the connection. */
    bool (*mid_request)(const struct conn *c);
    /* Optional: frees the buffers the protocol keeps between requests. Called by the sweep on
     * a connection that has read nothing since the last sweep, owes nothing, writes nothing,
     * and is not mid-request, so idle keep-alive connections hold no buffers. */
    void (*trim)(struct conn *c);
} conn_protocol;

typedef struct conn_limits {
    uint64_t header_timeout_ms;   /* a connection's first header block must arrive within this */
    uint64_t idle_timeout_ms;     /* from the last answer fully written to the next request */
    uint64_t write_timeout_ms;    /* a queued write must reach the client within this */
    size_t write_buffer_bytes;    /* queued answers beyond this pause the parser */
    size_t max_connections;       /* beyond it new connections are refused by the protocol */
    uint64_t drain_idle_grace_ms; /* a drain resets a connection idle this long after its start */
} conn_limits;

typedef struct conn_set_stats {
    uint64_t opened, open, rejected, read_timeouts, write_timeouts, drain_idle_resets;
} conn_set_stats;

typedef struct conn_set {
    uv_loop_t *loop;
    const conn_protocol *proto;
    conn_limits limits;
    struct conn *head; /* every connection whose memory is not yet freed */
    size_t count;
    uv_timer_t sweep;       /* checks every connection's deadlines */
    bool draining;          /* new answers close their connection; called back when none is left */
    uint64_t drain_idle_at; /* loop ms: from then a drain resets connections still idle */
    void (*on_empty)(struct conn_set *set);
    void *ctx; /* the protocol's context (the app) */
    conn_set_stats stats;
} conn_set;

typedef struct conn {
    uv_tcp_t tcp;
    uv_write_t wreq;
    conn_set *set;
    struct conn *prev, *next;
    enum conn_state state;
    bool owed;         /* a dispatched request holds the connection: its answer is owed */
    bool eof;          /* the client finished sending */
    bool reading;      /* uv_read_start is in force */
    bool write_active; /* uv_write owns `writing` until its callback */
    bool in_progress;  /* conn_progress is on the stack: a nested call only asks for a rerun */
    bool again;
    bool active; /* read something since the last sweep (an idle one's buffers are freed) */
    uint64_t read_deadline;  /* loop ms: header, body or idle deadline; 0 none; paused while owed */
    uint64_t write_deadline; /* loop ms: the write in progress must finish by then; 0 none */
    int fd;                  /* the socket, for flush's send(2); -1 while libuv does not tell */
    buf pending_in;          /* read, not yet parsed */
    buf out;                 /* answers queued, not yet handed to the kernel */
    buf writing;             /* what uv_write is sending */
    struct conn_stream *stream; /* a streamed answer's queue (conn_stream_start), or NULL */
} conn;

/* Sets up the set and its sweep timer on loop; ctx is for the protocol. */
void conn_set_init(conn_set *set, uv_loop_t *loop, const conn_protocol *proto,
                   const conn_limits *limits, void *ctx);
/* Accepts one connection from listener. Returns 0 or a negative libuv error. */
int conn_accept(conn_set *set, uv_stream_t *listener);
/* Serves a connected stream socket (the fuzz targets give one end of a socketpair): on NULL the
 * caller still owns fd. */
conn *conn_open_fd(conn_set *set, uv_os_sock_t fd);
/* The drain: every connection's next answer is its last (Connection: close), and it closes
 * once that answer is written; a connection still idle drain_idle_grace_ms after the start is
 * reset, unless a request waits in its socket. on_empty runs once no connection is left.
 * conn_set_close_all closes every socket at once. */
void conn_set_drain(conn_set *set);
/* Serves every connection waiting in listener's accept queue (before the listener closes, which
 * would reset them with their requests sent). Returns how many. */
size_t conn_accept_waiting(conn_set *set, uv_tcp_t *listener);
void conn_set_close_all(conn_set *set);
void conn_set_stop(conn_set *set); /* stops the sweep timer (closes its handle) */
/* A metrics source (core/metrics.h): the set's connection counters; ctx is the set. */
void conn_set_render_metrics(buf *out, void *ctx);

/* The protocol's calls. */
void conn_hold(conn *c);            /* a request is dispatched: its answer is owed */
bool conn_answered(conn *c);        /* the answer is queued; returns false when c was freed */
void conn_finish_input(conn *c);    /* no more requests from this client */
void conn_close(conn *c);           /* closes at once (what is queued is dropped) */
void conn_progress(conn *c);        /* parse, write, read or close as the state allows */
bool conn_may_parse(const conn *c); /* open, no answer owed, queued output under the mark */
void conn_read_deadline(conn *c, uint64_t ms); /* from now; 0 clears it */
bool conn_accepts_output(const conn *c);       /* open or draining */
bool conn_last_answer(const conn *c);          /* the answer being queued is the last one */
static inline buf *conn_output(conn *c)
{
    return &c->out;
}
/* A streamed answer (an event stream): after its head, queued in the output as any answer's,
 * its body is a queue of shared chunks written in order for as long as it lives. The answer
 * stays owed meanwhile, so no further request is parsed and neither the idle nor the header
 * deadline runs; the write deadline does, while the client leaves bytes unread. Its memory
 * between writes is the queue alone (the sweep frees the connection's buffers).
 *
 * It ends from below, `ended(data)` running exactly once, when the peer resets or
 * half-closes, a write fails or its deadline passes, the server drains (what is queued is
 * still written, then the connection closes), or a push would leave more than max_behind
 * bytes unsent (a reset). After ended the owner never touches the connection again; the
 * connection's memory goes as any other's. Or it ends from above, conn_stream_finish. */
typedef void (*conn_stream_ended)(void *data);
/* Starts it on a connection whose answer is owed and whose head is queued: 0, or -1 (no
 * memory; nothing changed). */
int conn_stream_start(conn *c, size_t max_behind, conn_stream_ended ended, void *data);
/* Queues a reference to ch behind what is queued and writes what the socket takes. False when
 * the stream has ended (ended ran, maybe inside this call). */
bool conn_stream_push(conn *c, out_chunk *ch);
/* Queues as conn_stream_push does, without writing: conn_stream_flush_all writes many
 * streams' queues at once. */
bool conn_stream_queue(conn *c, out_chunk *ch);
/* Writes what each of the n connections' queues holds (as conn_stream_push would), the sends
 * shared among the pool's threads (net/sendpool.h). A connection a failed write closes ends
 * its stream here (ended runs). */
void conn_stream_flush_all(struct sendpool *p, conn **cs, size_t n);
/* Bytes queued and not yet handed to the kernel. */
size_t conn_stream_behind(const conn *c);
/* The owner ends it: what is queued is written, then the connection closes; ended does not
 * run. c may be freed before this returns. */
void conn_stream_finish(conn *c);
/* Called with every chunk whose last byte the kernel took, for a process-local measurement
 * (the fan-out benchmark); NULL (the default) costs one test per chunk. */
extern void (*conn_stream_sent_hook)(const out_chunk *ch);

/* Bytes or EOF read from the socket; the fuzz harness calls these as the socket would. */
void conn_received(conn *c, const char *data, size_t len);
void conn_received_eof(conn *c);
bool conn_wants_input(const conn *c); /* reading now (for the fuzz harness) */
bool conn_alive(const conn_set *set, const conn *c);

#endif
