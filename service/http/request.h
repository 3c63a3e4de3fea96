/* request: one HTTP request from parse to response, and the calls handlers answer with. */
#ifndef ENTITYD_REQUEST_H
#define ENTITYD_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"

struct request;
struct app;
struct route;

typedef struct req_param {
    const char *key, *val; /* decoded, NUL-terminated, in the request arena */
    size_t key_len, val_len;
} req_param;

typedef struct slice {
    const char *s;
    size_t len;
} slice;

#define REQ_MAX_PATH_PARAMS 4
#define REQ_ID_MAX          128
#define REQ_TRACEPARENT_LEN 55
#define REQ_ORIGIN_MAX      256
/* A session token or API key (CONTRACT section 13) is far shorter; a longer one is no token. */
#define REQ_TOKEN_MAX 128
/* A Last-Event-ID header (an event id is "<ms>-<seq>", 41 bytes at most); longer is no id. */
#define REQ_LAST_EVENT_ID_MAX 64
/* User-Agent as a session records it (section 13: cut to 200 characters). */
#define REQ_USER_AGENT_MAX 200

/* Which credential signed a request in (req->credential). */
enum req_credential {
    REQ_CREDENTIAL_NONE = 0,
    REQ_CREDENTIAL_QUERY,  /* address and signature in the query string */
    REQ_CREDENTIAL_BEARER, /* Authorization: Bearer <session token> */
    REQ_CREDENTIAL_COOKIE, /* the entityd_session cookie */
    REQ_CREDENTIAL_KEY,    /* Authorization: Bearer <entity API key> (ek_…) */
};

/* The public id of the entity API key that signed a request in (req->api_key_id): 24 hex. */
#define REQ_API_KEY_ID_LEN 24

/* The answer to a session token that is not live; it names no token. */
#define REQUEST_SESSION_DEAD "The session token is unknown, expired or ended; create a new session."
/* The answer to an API key that is not valid; it names no key. */
#define REQUEST_KEY_DEAD                                                                           \
    "The API key is unknown or deleted, or its creator is no longer an owner of the entity."

/* Where answers go: the connection layer's side of a request, so that answering never names a
 * connection. */
typedef struct request_sink {
    /* Queues a complete answer whose body is the concatenation of n parts; `extra` is raw
     * "Name: v\r\n" lines or NULL. Queues nothing for a client that is gone. */
    void (*answer)(struct request *req, int status, const char *ctype, const char *extra,
                   const slice *parts, size_t n);
    /* The answer is queued and logged: the connection goes on, and may free the request. */
    void (*done)(struct request *req);
    /* Queues a streamed answer's head and hands the connection to the stream
     * (request_stream_begin); NULL when the client is gone or memory ran out (nothing queued). A
     * sink without streams (a re-check's) leaves it NULL. */
    struct conn *(*stream)(struct request *req, const char *ctype, const char *extra,
                           size_t max_behind, void (*ended)(void *data), void *data);
} request_sink;

typedef struct request {
    const request_sink *sink;
    void *sink_ctx; /* the sink's own: the connection */
    struct app *app;
    arena pool; /* per-request memory, reset when the response is written */
    int method; /* llhttp_method_t */
    buf url;    /* raw request target */
    buf body;   /* request body, at most MAX_BODY_BYTES */
    char *path; /* normalized path (arena) */
    size_t path_len;
    req_param *params; /* decoded query parameters (arena) */
    size_t nparams;
    const struct route *route; /* the router's (api); opaque here */
    const char *route_name;    /* the route's template for logs, "-" when none matched */
    int route_slot;            /* the route's metrics slot, -1 when none matched */
    slice path_params[REQ_MAX_PATH_PARAMS]; /* point into path */
    size_t npath_params;
    char request_id[REQ_ID_MAX + 1];
    /* W3C trace context: a valid traceparent's first 55 characters (version 00's whole form),
     * echoed in the answer and its trace id logged; "" when absent or malformed. */
    char traceparent[REQ_TRACEPARENT_LEN + 1];
    /* The Origin header when it is at most REQ_ORIGIN_MAX bytes, else ""; and whether the
     * request is a CORS preflight (it names Access-Control-Request-Method). */
    char origin[REQ_ORIGIN_MAX + 1];
    bool preflight;
    /* Credentials outside the URL (section 13). `bearer`: the token of an `Authorization:
     * Bearer` header ("" when absent), `bearer_bad` when that header is present but is no
     * Bearer credential of at most REQ_TOKEN_MAX bytes. `session_cookie`: the value of the
     * entityd_session cookie ("" when absent), `cookie_bad` when it is present but longer than
     * REQ_TOKEN_MAX. Never logged. */
    char bearer[REQ_TOKEN_MAX + 1];
    bool bearer_bad;
    char session_cookie[REQ_TOKEN_MAX + 1];
    bool cookie_bad;
    char user_agent[REQ_USER_AGENT_MAX + 1];       /* cut to REQ_USER_AGENT_MAX bytes */
    char last_event_id[REQ_LAST_EVENT_ID_MAX + 1]; /* the Last-Event-ID header, "" when absent */
    bool last_event_id_bad;                        /* … present but longer than that */
    /* A re-check of a stream's caller (push/streams.h) replayed as this request: it is not
     * logged nor counted, and the stream's handler answers it 200 once the gate lets it pass
     * instead of opening a stream. */
    bool probe;
    /* The credential the sign-in step used (enum req_credential): a cookie-authenticated
     * write is held to its Origin, which a Bearer token or a query signature is not. */
    int credential;
    /* With REQ_CREDENTIAL_KEY: the key's id ("" otherwise), which writes add to their events
     * and records as apiKeyId, and the entity the key acts on ("c-<uuid>"); the caller is then
     * the key's creator. */
    char api_key_id[REQ_API_KEY_ID_LEN + 1];
    char api_key_entity[40];
    /* The entityd_session cookie was no live session on a route where signing is optional:
     * the request went on without it, and the answer clears it (Max-Age=0). */
    bool clear_session_cookie;
    bool has_content_type, json_content_type;
    bool expect_continue;
    uint64_t body_total;
    uint64_t start_ns;
    char caller[43]; /* lowercase address of the authenticated caller, "" when none */
    bool signed_in;
    bool answered;
    int status;
    void *state;           /* handler-owned state (usually in the arena) */
    struct auth_ctx *auth; /* the sign-in step's result (arena), NULL when none ran */
    /* Runs when the request is reset: releases what the handler holds outside the arena.
     * Answering resets the request, so after an answer a handler touches none of its state. */
    void (*on_reset)(void *data);
    /* A check the sign-in step left to ride just ahead of the handler's first read, in the same
     * round trip (set by auth, run by request_read_flags); NULL when none is owed. It returns the
     * store flags for that read. */
    int (*before_read)(struct request *req);
    /* Set by a check that finished after the handler started: the status that overrides its
     * answer. */
    int auth_veto;
    void *on_reset_data;
} request;

/* Finds a decoded query parameter; NULL when absent. */
const char *request_param(const request *req, const char *key, size_t *len);
/* The n-th path parameter of the matched route. */
slice request_path_param(const request *req, size_t n);

/* Answers with `{"success":true,...}`: `body` is an object whose members follow "success".
 * Steals the reference to body. Exactly one answer per request. */
void request_reply(request *req, int status, json_t *body);
/* request_reply with the raw "Name: v\r\n" header lines `extra` (a Set-Cookie). */
void request_reply_headers(request *req, int status, json_t *body, const char *extra);
/* request_fail (no field) with the raw header lines `extra`. */
void request_fail_headers(request *req, int status, const char *code, const char *message,
                          const char *extra);
/* Answers with the contract's error envelope; `field` may be NULL. */
void request_fail(request *req, int status, const char *code, const char *message,
                  const char *field);
/* Writes s as a field name that is valid UTF-8: bytes that are not part of a valid sequence as
 * %XX (query keys are decoded bytes and need not be UTF-8). Returns out. */
char *request_printable(const char *s, size_t len, char *out, size_t cap);

/* Shorthands for the common failures. */
void request_fail_field(request *req, const char *field, const char *message);
void request_fail_internal(request *req, const char *what);

/* The handler's state: size zeroed bytes in the request's arena, also set as req->state. On
 * NULL the request is answered (500) and the handler returns. */
void *request_state(request *req, size_t size);

/* Forgets everything of the request answered, for the next one on its connection (runs the
 * handler's on_reset first); keeps small buffers. */
void request_reset(request *req);

/* For a handler about to send its first store read: runs the check the sign-in step left to
 * ride ahead of it (req->before_read, once) and returns the store flags (redis/store.h) that
 * read must be sent with; 0 when none is owed. Call it just before the read, as an argument of
 * the store call. */
int request_read_flags(request *req);

/* The attributes of the entityd_session cookie after its value ("; HttpOnly; ..."), the same
 * whether it is set or cleared, so that a browser replaces the one it holds. */
const char *request_session_cookie_attributes(const request *req);

/* Monotonic nanoseconds. */
uint64_t request_now_ns(void);

/* An error answer with a Retry-After of `seconds` (429 rate_limited). */
void request_fail_retry(request *req, int status, const char *code, const char *message,
                        long long seconds);
/* 204 with no body and the given raw "Name: v\r\n" header lines (a CORS preflight). */
void request_reply_empty(request *req, const char *extra);
/* 405 with the Allow header. */
void request_fail_allow(request *req, const char *allow);
/* A JSON answer whose body is the concatenation of parts (pre-rendered JSON pieces); the
 * parts are copied. */
void request_reply_parts(request *req, int status, const slice *parts, size_t n);
/* A streamed answer (an event stream, CONTRACT section 14): status 200 of type ctype without a
 * Content-Length, with Cache-Control: no-cache, X-Accel-Buffering: no (a gateway must not
 * hold it back), the header lines `extra`, those every answer carries (CORS, trace context)
 * and Connection: close (the body ends with the connection). The head is queued and the
 * request logged now; the request is then reset (its handler's state goes) and the
 * connection carries the stream (net/conn.h, conn_stream_*: ended, max_behind) until it ends.
 * Returns the connection, or NULL when there is no stream: the client is gone, memory ran
 * out, or a check that rode with the handler's read refused the caller (then req is answered
 * as usual; ended never runs). */
struct conn *request_stream_begin(request *req, const char *ctype, const char *extra,
                                  size_t max_behind, void (*ended)(void *data), void *data);
/* A non-JSON answer (the metrics text); body is copied. */
void request_reply_raw(request *req, int status, const char *ctype, const char *body, size_t len);
#endif
