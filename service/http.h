/* http: one client connection: llhttp parsing, limits, timeouts, ordered responses. */
#ifndef ENTITYD_HTTP_H
#define ENTITYD_HTTP_H

#include <llhttp.h>
#include <stdbool.h>
#include <uv.h>

#include "buf.h"
#include "conn.h"
#include "request.h"

/* An HTTP/1.1 connection: the connection layer's part first, then the parser and the one
 * request in progress (requests on a connection are answered one at a time, in order). */
typedef struct http_conn {
    conn base;
    llhttp_t parser;
    request req;
    buf hname, hval; /* the header being parsed */
    size_t header_bytes;
    int err_status;  /* a limit or framing rule broken while parsing: 400, 413, 414 or 431 */
    bool in_message; /* between message begin and message complete */
    /* Where a header value began and ended, to see a folded line (http.c, refuse_framing). */
    const char *exec_start, *exec_end; /* the bytes llhttp_execute works on now */
    const char *gap_from;              /* the last field name's end in this buffer, or NULL */
    bool gap_open, gap_lf;             /* between a field's colon and its value; an LF seen */
    bool value_open, value_at_end;     /* a value's span seen; it ended with the buffer */
} http_conn;

/* The protocol the server's connection set runs (conn.h); its context is the app. */
extern const conn_protocol http_protocol;

/* Called once the current request's answer is queued: the next request may be parsed. Returns
 * false when the connection is gone (its memory freed): the caller touches nothing of it. */
bool http_request_done(http_conn *h);

/* Appends a complete response to c->out: the body is the concatenation of n parts.
 * `extra_headers` is raw "Name: v\r\n" lines or NULL. */
void http_queue_response(http_conn *h, int status, const char *request_id, const char *content_type,
                         const char *extra_headers, const slice *parts, size_t n);

#endif
