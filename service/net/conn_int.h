/* conn_int: what conn.c and conn_stream.c share inside the net layer: a streamed answer's
 * queue (conn.h, conn_stream_*) and the connection calls the stream's code needs. */
#ifndef ENTITYD_CONN_INT_H
#define ENTITYD_CONN_INT_H

#include "net/conn.h"

struct conn_stream;

/* What the connection's code asks of a streamed answer (conn_stream.c sets them at
 * conn_stream_start): conn.c reaches the stream's code through them alone. */
typedef struct conn_stream_ops {
    void (*free)(struct conn_stream *s);
    /* The stream ends from below: its owner hears it once, and the hold was the stream's. */
    void (*gone)(conn *c);
    /* Hands the kernel what the queue holds (after the connection's own output). */
    void (*flush)(conn *c);
    /* The connection's uv_write finished (status as libuv's): the chunks it sent are done. */
    void (*written)(conn *c, int status);
    /* The drain ends a stream from below, then writes what it holds and closes. */
    void (*drain)(conn *c);
    /* A stream between writes keeps its queue alone: the head's buffers and the parser's go. */
    void (*trim)(conn *c);
} conn_stream_ops;

/* A streamed answer's queue: a ring of chunk references, the first partly sent by `off`. */
typedef struct conn_stream {
    const conn_stream_ops *ops;
    out_chunk **q;
    size_t cap, head, n; /* cap a power of two, or 0 before the first push */
    size_t off;          /* bytes of q[head] already with the kernel */
    size_t behind;       /* bytes queued, not yet with the kernel */
    size_t max_behind;
    size_t in_write;         /* chunks from head that the active uv_write sends */
    conn_stream_ended ended; /* NULL once the stream has ended */
    void *data;
} conn_stream;

/* conn.c's */
uint64_t conn_fresh_ms(const conn *c); /* the loop's clock, read again */
void conn_close_socket(conn *c, bool reset);
void conn_on_write(uv_write_t *w, int status);

/* Frees c's buffers (and the protocol's, through its trim): the next bytes allocate them
 * again. Only when nothing is owed, written or unread. */
void conn_give_back(conn *c);

#endif
