/* http: one client connection: llhttp parsing, limits, timeouts, ordered responses. */
#ifndef ENTITYD_HTTP_H
#define ENTITYD_HTTP_H

#include <llhttp.h>
#include <stdbool.h>
#include <uv.h>

#include "core/buf.h"
#include "http/request.h"
#include "net/conn.h"

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

/* What serves the parsed requests: the context of the connection set that runs http_protocol.
 * dispatch answers each request exactly once, now or later (request.h); app is handed to every
 * request as req->app. */
typedef struct http_service {
    struct app *app;
    void (*dispatch)(request *req);
} http_service;

/* The protocol a connection set runs for HTTP/1.1 (net/conn.h); its context: an http_service. */
extern const conn_protocol http_protocol;

#endif
