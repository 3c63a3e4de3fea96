/* httpc: HTTP requests from the event loop, through libcurl's multi-socket interface driven by
 * libuv (sockets watched with uv_poll, libcurl's timer as one uv_timer). */
#ifndef ENTITYD_HTTPC_H
#define ENTITYD_HTTPC_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

struct sockaddr;

typedef struct httpc httpc;

enum httpc_status {
    HTTPC_OK = 0,  /* an HTTP answer arrived (any status code) */
    HTTPC_TIMEOUT, /* no complete answer within the request's timeout */
    HTTPC_ERROR,   /* connect, TLS, protocol or resource failure; or the client closed */
};

typedef struct httpc_result {
    int status;       /* enum httpc_status */
    long http_code;   /* with HTTPC_OK */
    const char *body; /* the answer's body, NUL-terminated; valid during the callback only */
    size_t body_len;
    double seconds;    /* from the request's start to its end */
    const char *error; /* a short sentence with HTTPC_TIMEOUT / HTTPC_ERROR, never the URL */
    long retry_after;  /* with HTTPC_OK: the answer's Retry-After in seconds, or -1 */
    bool refused;      /* HTTPC_ERROR because the guard refused every address tried, or the
                        * scheme is not https with https_only */
} httpc_result;

/* The peer guard of httpc_opts: why a connection to sa may not be made, or NULL when it may. */
typedef const char *(*httpc_guard)(const struct sockaddr *sa);

/* What httpc_post adds to httpc_post_json's request. */
typedef struct httpc_opts {
    const char *const *headers; /* "Name: value" lines, copied */
    size_t nheaders;
    /* The answer's body is read up to this many bytes and the rest ignored (the answer still
     * counts); 0: answers past 1 MiB fail. */
    size_t body_limit;
    /* Checked on each address actually connected to (no second lookup); NULL: none. */
    httpc_guard guard;
    /* https URLs alone; another scheme fails as refused. */
    bool https_only;
} httpc_opts;

/* Runs exactly once per request, on the loop; never inside httpc_post_json. */
typedef void (*httpc_cb)(void *data, const httpc_result *r);

/* Creates a client on loop. Returns 0, or -1 with err set. */
int httpc_new(httpc **out, uv_loop_t *loop, char *err, size_t err_len);
/* Fails every request in flight (HTTPC_ERROR, callbacks run) and closes the client's handles;
 * httpc_post_json fails afterwards. The loop then runs until the handles are closed. */
void httpc_close(httpc *c);
/* Frees the client after httpc_close and the loop's run; accepts NULL. */
void httpc_free(httpc *c);

/* POSTs body (copied) as application/json to url (http or https; the URL is borrowed until the
 * request ends), answers bigger than 1 MiB fail. Returns 0, or -1 when the request could not
 * start (cb will not run). */
int httpc_post_json(httpc *c, const char *url, const char *body, size_t len, long timeout_ms,
                    httpc_cb cb, void *data);
/* The same with opts (borrowed until this returns). Never follows a redirect nor uses a proxy
 * from the environment. */
int httpc_post(httpc *c, const char *url, const char *body, size_t len, long timeout_ms,
               const httpc_opts *opts, httpc_cb cb, void *data);

#endif
