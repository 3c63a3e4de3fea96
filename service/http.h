/* http: one client connection: llhttp parsing, limits, timeouts, ordered responses. */
#ifndef ENTITYD_HTTP_H
#define ENTITYD_HTTP_H

#include <llhttp.h>
#include <stdbool.h>
#include <uv.h>

#include "buf.h"
#include "request.h"

struct server;

typedef struct conn {
    uv_tcp_t tcp;
    uv_write_t wreq;
    uint64_t deadline; /* loop time (ms) past which the server's sweep closes it; 0: none */
    struct server *srv;
    struct conn *prev, *next; /* the server's list of open connections */
    llhttp_t parser;
    request req;     /* the one request in progress: requests are answered one at a time */
    buf pending_in;  /* bytes read past a request that is still being answered */
    buf out;         /* responses not yet handed to the kernel */
    buf writing;     /* responses uv_write is sending; untouched until its callback */
    buf hname, hval; /* the header being parsed */
    size_t header_bytes;
    int err_status;   /* a limit hit while parsing: 413, 414 or 431 */
    bool in_request;  /* dispatched, not yet answered */
    bool in_execute;  /* parser loop on the stack: answers must not re-enter it */
    bool in_message;  /* between message begin and message complete */
    bool close_after; /* close once everything queued is written */
    bool closing;
    bool tcp_closed;
    bool eof; /* the client finished sending */
    bool reading;
    bool write_active;
    bool over_capacity;
} conn;

/* Sets up parsing for a new connection. */
void http_conn_init(conn *c);
/* Feeds bytes read from the socket; keeps what must wait in pending_in. */
void http_conn_feed(conn *c, const char *data, size_t len);
/* Called when the current request's answer is queued: resumes the parser. */
void http_conn_request_done(conn *c);
/* Frees parsing state (the conn's handles are closed by the server). */
void http_conn_deinit(conn *c);

/* Appends a complete response to c->out: the body is the concatenation of n parts.
 * `extra_headers` is raw "Name: v\r\n" lines or NULL. */
void http_queue_response(conn *c, int status, const char *request_id, const char *content_type,
                         const char *extra_headers, const slice *parts, size_t n);

#endif
