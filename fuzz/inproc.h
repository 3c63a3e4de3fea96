/* inproc: the service in one process without a network or Redis, for the fuzz targets.
 *
 * One libuv loop, an app from config defaults (AUTH_SECRET set), an auth verifier, a store that
 * is closed before it ever connects (so every Redis command answers 503 at once), and a server
 * struct that never listens. Each connection is the service's own `http_conn` over one end of an
 * AF_UNIX socketpair; the harness holds the other end and reads the responses back. */
#ifndef ENTITYD_FUZZ_INPROC_H
#define ENTITYD_FUZZ_INPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "http.h"
#include "server.h"

/* The address PLATFORM_ADMINS holds in the harness, and one that is nobody in particular. */
#define INPROC_PLATFORM_ADMIN "0x1111111111111111111111111111111111111111"
#define INPROC_STRANGER       "0x2222222222222222222222222222222222222222"

/* Sets everything up once (idempotent). max_body: MAX_BODY_BYTES for the app. */
void inproc_init(const char *max_body);
app *inproc_app(void);

/* A new connection, as accepted by the server: header timer armed, reading. */
http_conn *inproc_conn_open(void);
/* True while the connection has not been freed. */
bool inproc_conn_alive(const http_conn *c);
/* True when the connection would be fed by a read now (what the server would do). */
bool inproc_conn_wants_input(const http_conn *c);
/* Runs the loop without blocking and reads whatever the connection wrote. */
void inproc_pump(void);
/* The client is done sending (shutdown of its write side): runs the loop (bounded) while the
 * connection has something to do about it. */
void inproc_half_close(http_conn *c);
/* Waits (bounded) for the answer in progress, closes the connection and runs the loop until it
 * is freed; then checks every response written (aborts on a malformed one, on a 5xx other than
 * 503, on a status outside `allowed` when allowed is non-NULL, a 0-terminated list, or on an
 * answer that does not match its request log line). Returns the number of responses. */
size_t inproc_conn_finish(http_conn *c, const int *allowed);

/* The request log is read back too: every answer written must have its log line, in order and
 * with the same status (and an answer to HEAD has no body). */

#endif
