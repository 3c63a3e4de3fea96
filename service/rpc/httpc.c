/* httpc: HTTP requests from the event loop, through libcurl's multi-socket interface driven by
 * libuv.
 *
 * libcurl says which sockets to watch (socket callback) and when it next needs a call (timer
 * callback); libuv watches and calls curl_multi_socket_action back. A socket's uv_poll_t is
 * attached to it with curl_multi_assign and freed in its close callback. Finished transfers are
 * collected after each action and answered from there, so a callback never runs inside
 * httpc_post_json. */
#include "rpc/httpc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <curl/curl.h>

#define MAX_BODY (1u << 20)

struct httpc {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    bool closing;
    struct transfer *transfers; /* in flight, for httpc_close */
};

typedef struct transfer {
    httpc *c;
    CURL *easy;
    struct curl_slist *headers;
    httpc_cb cb;
    void *data;
    char *body;
    size_t len, cap;
    bool too_big;
    size_t body_limit; /* 0: MAX_BODY, past it the transfer fails */
    httpc_guard guard;
    bool https_only;
    const char *refused; /* the guard's last refusal */
    uint64_t start_ms;
    struct transfer *prev, *next;
    char error[CURL_ERROR_SIZE];
} transfer;

typedef struct watch {
    uv_poll_t poll;
    httpc *c;
    curl_socket_t fd;
} watch;

static void transfer_unlink(transfer *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        t->c->transfers = t->next;
    if (t->next)
        t->next->prev = t->prev;
}

/* Answers and frees t. */
static void transfer_end(transfer *t, CURLcode code)
{
    httpc *c = t->c;
    httpc_result r = {0};
    r.seconds = (double)(uv_now(c->loop) - t->start_ms) / 1000.0;
    r.body = t->body ? t->body : "";
    r.body_len = t->len;
    r.retry_after = -1;
    /* A limited body stops the transfer on purpose: the answer is what was read. */
    bool cut = t->too_big && t->body_limit && code == CURLE_WRITE_ERROR;
    if ((code == CURLE_OK && !t->too_big) || cut) {
        r.status = HTTPC_OK;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.http_code);
        curl_off_t ra = -1;
        if (curl_easy_getinfo(t->easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
            r.retry_after = (long)ra;
    } else if (t->https_only && code == CURLE_UNSUPPORTED_PROTOCOL) {
        r.status = HTTPC_ERROR;
        r.refused = true;
        r.error = "not an https URL";
    } else if (t->refused && code == CURLE_COULDNT_CONNECT) {
        r.status = HTTPC_ERROR;
        r.refused = true;
        r.error = t->refused;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
        r.status = HTTPC_TIMEOUT;
        r.error = "no answer within the timeout";
    } else {
        r.status = HTTPC_ERROR;
        /* curl's messages name the host at most, never the userinfo or the query. */
        r.error = t->too_big    ? "answer too large"
                  : t->error[0] ? t->error
                                : curl_easy_strerror(code);
    }
    transfer_unlink(t);
    curl_multi_remove_handle(c->multi, t->easy);
    t->cb(t->data, &r);
    curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->body);
    free(t);
}

static void collect_done(httpc *c)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        transfer *t = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        transfer_end(t, msg->data.result);
    }
}

static void on_timer(uv_timer_t *h)
{
    httpc *c = h->data;
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    collect_done(c);
}

/* libcurl's timer callback: never calls libcurl, only (re)arms the one timer. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    httpc *c = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&c->timer);
    else
        uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    watch *w = h->data;
    httpc *c = w->c;
    int flags = 0, running;
    /* A socket error is libcurl's to find: tell it both directions are ready. */
    if (status < 0)
        flags = CURL_CSELECT_IN | CURL_CSELECT_OUT | CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(c->multi, w->fd, flags, &running);
    collect_done(c);
}

static void on_watch_closed(uv_handle_t *h)
{
    free(h->data);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int action, void *userp, void *socketp)
{
    (void)easy;
    httpc *c = userp;
    watch *w = socketp;
    if (action == CURL_POLL_REMOVE) {
        if (w) {
            uv_poll_stop(&w->poll);
            uv_close((uv_handle_t *)&w->poll, on_watch_closed);
            curl_multi_assign(c->multi, fd, NULL);
        }
        return 0;
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return -1;
        w->c = c;
        w->fd = fd;
        if (uv_poll_init_socket(c->loop, &w->poll, fd) != 0) {
            free(w);
            return -1;
        }
        w->poll.data = w;
        curl_multi_assign(c->multi, fd, w);
    }
    int events = 0;
    if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    uv_poll_start(&w->poll, events, on_poll);
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userp)
{
    transfer *t = userp;
    size_t n = size * nmemb;
    if (t->body_limit && t->len + n > t->body_limit) {
        n = t->body_limit - t->len;
        t->too_big = true;
    }
    if (!t->body_limit && t->len + n + 1 > MAX_BODY) {
        t->too_big = true;
        return 0; /* aborts the transfer */
    }
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 512;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *b = realloc(t->body, cap);
        if (!b)
            return 0;
        t->body = b;
        t->cap = cap;
    }
    memcpy(t->body + t->len, ptr, n);
    t->len += n;
    t->body[t->len] = '\0';
    return t->too_big ? 0 : n;
}

/* The connection's socket, opened only when the guard allows the address curl is about to
 * connect to: the resolved address itself, so a name cannot resolve elsewhere in between. */
static curl_socket_t on_open_socket(void *userp, curlsocktype purpose, struct curl_sockaddr *a)
{
    transfer *t = userp;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    const char *why = t->guard((const struct sockaddr *)&a->addr);
    if (why) {
        t->refused = why;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

int httpc_new(httpc **out, uv_loop_t *loop, char *err, size_t err_len)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, err_len, "cannot initialise libcurl");
        return -1;
    }
    httpc *c = calloc(1, sizeof *c);
    if (!c || !(c->multi = curl_multi_init())) {
        free(c);
        curl_global_cleanup();
        snprintf(err, err_len, "cannot create the HTTP client");
        return -1;
    }
    c->loop = loop;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    *out = c;
    return 0;
}

int httpc_post_json(httpc *c, const char *url, const char *body, size_t len, long timeout_ms,
                    httpc_cb cb, void *data)
{
    return httpc_post(c, url, body, len, timeout_ms, NULL, cb, data);
}

int httpc_post(httpc *c, const char *url, const char *body, size_t len, long timeout_ms,
               const httpc_opts *opts, httpc_cb cb, void *data)
{
    if (c->closing)
        return -1;
    transfer *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->c = c;
    t->cb = cb;
    t->data = data;
    t->start_ms = uv_now(c->loop);
    t->easy = curl_easy_init();
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    /* No "Expect: 100-continue" round trip before a larger body. */
    struct curl_slist *h = t->headers ? curl_slist_append(t->headers, "Expect:") : NULL;
    if (h)
        t->headers = h;
    for (size_t i = 0; opts && h && i < opts->nheaders; i++) {
        h = curl_slist_append(t->headers, opts->headers[i]);
        if (h)
            t->headers = h;
    }
    if (!t->easy || !h) {
        curl_easy_cleanup(t->easy);
        curl_slist_free_all(t->headers);
        free(t);
        return -1;
    }
    CURL *e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "entityd");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    if (opts) /* a proxy would connect to the address the guard must see */
        curl_easy_setopt(e, CURLOPT_PROXY, "");
    if (opts && opts->guard) {
        t->guard = opts->guard;
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
    }
    if (opts) {
        t->body_limit = opts->body_limit;
        t->https_only = opts->https_only;
        if (opts->https_only)
            curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
    }
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(t->headers);
        free(t);
        return -1;
    }
    t->next = c->transfers;
    if (t->next)
        t->next->prev = t;
    c->transfers = t;
    return 0;
}

void httpc_close(httpc *c)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    while (c->transfers) {
        transfer *t = c->transfers;
        snprintf(t->error, sizeof t->error, "the service is shutting down");
        transfer_end(t, CURLE_ABORTED_BY_CALLBACK);
    }
    /* While the loop still runs: the cached connections' watchers close through it. */
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, NULL);
}

void httpc_free(httpc *c)
{
    if (!c)
        return;
    if (c->multi)
        curl_multi_cleanup(c->multi);
    free(c);
    curl_global_cleanup();
}
