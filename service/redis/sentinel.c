/* sentinel: Sentinel mode, as the locator of the single connection (single.h): the primary's
 * address from Redis Sentinels before each connect, a ROLE check that the node reached is the
 * primary, and a +switch-master as it happens dropping the connection to the old one.
 *
 * Two kinds of connection, each to one sentinel at a time: a lookup (SENTINEL
 * get-master-addr-by-name, then closed) that tries the sentinels in turn, each within
 * REDIS_TIMEOUT_MS; and a subscription to +switch-master that moves to the next sentinel, with
 * backoff, whenever its connection goes. An attempt ends when its connection ends: a failed
 * connect, a disconnect, or its timer freeing it; only then is the next sentinel tried. */
#include "redis/sentinel.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/backoff.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/redis_uv.h"
#include "redis/resolve.h"
#include "redis/single.h"

#define MAX_SENTINELS  16
#define HOST_SIZE      RESOLVE_HOST_SIZE
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

typedef resolve_endpoint addr;

typedef struct lookup {
    redisAsyncContext *ac;
    resolver resolver;
    uv_timer_t timer;
    int next, tried;
    bool busy;
    resolve_url *at; /* the connection's address, written when the primary is found */
    single_found_fn found;
} lookup;

typedef struct subscription {
    redisAsyncContext *ac;
    resolver resolver;
    uv_timer_t timer;
    int next;
    backoff backoff;
} subscription;

struct sentinel {
    app *app;
    bool closed;
    addr addrs[MAX_SENTINELS];
    int n;
    char master[128];
    single *conn; /* told when the primary moves */
    uint64_t switches;
    lookup q;
    subscription sub;
};

static void lookup_try(sentinel *s);
static void sub_connect(sentinel *s);

/* --- lookup --- */

/* The primary the sentinels name (host NULL: none named it in time) is where the next
 * connect goes. */
static void lookup_finish(sentinel *s, const char *host, int port)
{
    s->q.busy = false;
    uv_timer_stop(&s->q.timer);
    if (s->q.ac) {
        redisAsyncContext *ac = s->q.ac;
        s->q.ac = NULL;
        redisAsyncDisconnect(ac); /* deferred when called from its reply callback */
    }
    if (!host) {
        s->q.found(s->conn, "redis primary unknown: no sentinel named it");
        return;
    }
    resolve_url *at = s->q.at;
    if (strcmp(host, at->host) || port != at->port) {
        buf *l = log_begin(LOG_INFO, "redis primary");
        if (l) {
            log_str(l, "host", host);
            log_int(l, "port", port);
            log_end(l);
        }
        snprintf(at->host, sizeof at->host, "%s", host);
        at->port = port;
    }
    s->q.found(s->conn, NULL);
}

/* This attempt's connection has ended: the next sentinel, or the end. */
static void lookup_next(sentinel *s)
{
    s->q.ac = NULL;
    uv_timer_stop(&s->q.timer);
    if (s->closed || !s->q.busy)
        return;
    lookup_try(s);
}

static void on_lookup_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    sentinel *s = privdata;
    redisReply *reply = r;
    if (!reply || s->closed || !s->q.busy || ac != s->q.ac)
        return; /* a connection that ended: its end moves on */
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        reply->element[1]->type == REDIS_REPLY_STRING && reply->element[0]->len < HOST_SIZE) {
        char host[HOST_SIZE];
        memcpy(host, reply->element[0]->str, reply->element[0]->len);
        host[reply->element[0]->len] = '\0';
        long port = strtol(reply->element[1]->str, NULL, 10);
        if (port > 0 && port <= 65535) {
            lookup_finish(s, host, (int)port);
            return;
        }
    }
    /* Nil (the master is unknown to it) or an error: ask the next one. */
    redisAsyncDisconnect(ac);
}

static void on_lookup_connect(const redisAsyncContext *ac, int status)
{
    sentinel *s = ac->data;
    if (status != REDIS_OK && ac == s->q.ac)
        lookup_next(s); /* hiredis frees the context after this callback */
}

static void on_lookup_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    sentinel *s = ac->data;
    if (ac == s->q.ac)
        lookup_next(s);
}

static void on_lookup_timer(uv_timer_t *t)
{
    sentinel *s = t->data;
    redisAsyncContext *ac = s->q.ac;
    s->q.ac = NULL;
    if (ac)
        redisAsyncFree(ac); /* a silent sentinel: its callbacks see a context no longer ours */
    lookup_next(s);
}

static void on_lookup_resolved(void *data, int status, const char *numeric)
{
    sentinel *s = data;
    if (s->closed || !s->q.busy)
        return;
    const addr *a = &s->addrs[(s->q.next + s->n - 1) % s->n];
    if (status == 0)
        s->q.ac = redis_uv_connect(s->app->loop, numeric, a->port, s, NULL, on_lookup_connect,
                                   on_lookup_disconnect);
    if (!s->q.ac) {
        lookup_next(s);
        return;
    }
    redisAsyncCommand(s->q.ac, on_lookup_reply, s, "SENTINEL get-master-addr-by-name %s",
                      s->master);
}

static void lookup_try(sentinel *s)
{
    if (s->q.tried == s->n) {
        lookup_finish(s, NULL, 0);
        return;
    }
    const addr *a = &s->addrs[s->q.next % s->n];
    s->q.next = (s->q.next + 1) % s->n;
    s->q.tried++;
    uv_timer_start(&s->q.timer, on_lookup_timer, (uint64_t)s->app->cfg.redis_timeout_ms, 0);
    resolve_start(&s->q.resolver, s->app->loop, a->host, on_lookup_resolved, s);
}

/* The locator's find: asks the sentinels in turn, each within REDIS_TIMEOUT_MS. One lookup
 * at a time: the connection asks again only after an answer. */
static void sentinel_find(void *ctx, resolve_url *at, single_found_fn found, single *c)
{
    sentinel *s = ctx;
    (void)c; /* the one given to sentinel_start */
    if (s->closed || s->q.busy)
        return;
    s->q.busy = true;
    s->q.tried = 0;
    s->q.at = at;
    s->q.found = found;
    lookup_try(s);
}

/* --- the +switch-master subscription --- */

static void on_sub_timer(uv_timer_t *t)
{
    sub_connect(t->data);
}

static void sub_retry(sentinel *s)
{
    s->sub.ac = NULL;
    if (!s->closed)
        uv_timer_start(&s->sub.timer, on_sub_timer, backoff_next(&s->sub.backoff), 0);
}

/* "<master> <old ip> <old port> <new ip> <new port>" */
static bool names_master(const sentinel *s, const redisReply *body)
{
    size_t n = strlen(s->master);
    return body->type == REDIS_REPLY_STRING && body->len > n && body->str[n] == ' ' &&
           !memcmp(body->str, s->master, n);
}

static void on_sub_message(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    sentinel *s = privdata;
    redisReply *reply = r;
    if (!reply || s->closed || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING)
        return;
    if (!strcmp(reply->element[0]->str, "subscribe")) {
        backoff_reset(&s->sub.backoff);
        return;
    }
    if (!strcmp(reply->element[0]->str, "message") && names_master(s, reply->element[2])) {
        buf *l = log_begin(LOG_WARN, "redis primary switched");
        if (l) {
            log_strn(l, "detail", reply->element[2]->str, reply->element[2]->len);
            log_end(l);
        }
        /* The connection to the old primary goes, and its reconnect asks the sentinels. */
        s->switches++;
        if (s->conn)
            single_drop(s->conn);
    }
}

static void on_sub_connect(const redisAsyncContext *ac, int status)
{
    sentinel *s = ac->data;
    if (status != REDIS_OK && ac == s->sub.ac)
        sub_retry(s);
}

static void on_sub_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    sentinel *s = ac->data;
    if (ac == s->sub.ac)
        sub_retry(s);
}

static void on_sub_resolved(void *data, int status, const char *numeric)
{
    sentinel *s = data;
    if (s->closed)
        return;
    const addr *a = &s->addrs[(s->sub.next + s->n - 1) % s->n];
    if (status == 0)
        s->sub.ac = redis_uv_connect(s->app->loop, numeric, a->port, s, NULL, on_sub_connect,
                                     on_sub_disconnect);
    if (!s->sub.ac) {
        sub_retry(s);
        return;
    }
    redisAsyncCommand(s->sub.ac, on_sub_message, s, "SUBSCRIBE +switch-master");
}

static void sub_connect(sentinel *s)
{
    if (s->closed)
        return;
    const addr *a = &s->addrs[s->sub.next % s->n];
    s->sub.next = (s->sub.next + 1) % s->n;
    resolve_start(&s->sub.resolver, s->app->loop, a->host, on_sub_resolved, s);
}

/* --- life --- */

static int parse(sentinel *s, const char *list, char *err, size_t err_len)
{
    int n = resolve_parse_list(list, s->addrs, MAX_SENTINELS);
    if (n < 0) {
        snprintf(err, err_len, "REDIS_SENTINELS must be host:port[,host:port...] (at most %d)",
                 MAX_SENTINELS);
        return -1;
    }
    s->n = n;
    return 0;
}

int sentinel_new(sentinel **out, app *a, char *err, size_t err_len)
{
    sentinel *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    const char *master = a->cfg.redis_sentinel_master ? a->cfg.redis_sentinel_master : "";
    if (parse(s, a->cfg.redis_sentinels, err, err_len) != 0) {
        free(s);
        return -1;
    }
    if (!master[0] || strlen(master) >= sizeof s->master || strchr(master, ' ')) {
        snprintf(err, err_len, "REDIS_SENTINEL_MASTER must name the master (no spaces)");
        free(s);
        return -1;
    }
    snprintf(s->master, sizeof s->master, "%s", master);
    s->app = a;
    backoff_init(&s->sub.backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    *out = s;
    return 0;
}

static void sentinel_close(void *ctx)
{
    sentinel *s = ctx;
    if (s->closed)
        return;
    s->closed = true;
    resolve_cancel(&s->q.resolver);
    resolve_cancel(&s->sub.resolver);
    redisAsyncContext *q = s->q.ac, *sub = s->sub.ac;
    s->q.ac = s->sub.ac = NULL;
    if (q)
        redisAsyncFree(q);
    if (sub)
        redisAsyncFree(sub);
    uv_close((uv_handle_t *)&s->q.timer, NULL);
    uv_close((uv_handle_t *)&s->sub.timer, NULL);
}

static void sentinel_free(void *ctx)
{
    free(ctx);
}

/* --- the rest of the locator --- */

static void sentinel_render_metrics(buf *out, void *ctx)
{
    const sentinel *s = ctx;
    metrics_counter(out, "entityd_redis_primary_switches_total",
                    "Sentinel mode: +switch-master announcements for the primary.", s->switches);
}

/* The loop's handles are made here, not in sentinel_new: a locator that never started (the
 * connection could not be made) is freed without a handle to close. */
static void sentinel_start(void *ctx, single *c)
{
    sentinel *s = ctx;
    s->conn = c;
    uv_timer_init(s->app->loop, &s->q.timer);
    uv_timer_init(s->app->loop, &s->sub.timer);
    s->q.timer.data = s->sub.timer.data = s;
    sub_connect(s);
    metrics_register(sentinel_render_metrics, s);
}

static int sentinel_check_argv(void *ctx, const char *argv[3], size_t lens[3])
{
    (void)ctx;
    argv[0] = "ROLE";
    lens[0] = 4;
    return 1;
}

/* The node the sentinels named must say it is a primary (a failover may be under way, or the
 * answer was stale). Other answers (errors) are the handshake's to judge. */
static bool sentinel_check(void *ctx, const redisReply *reply)
{
    (void)ctx;
    if (reply->type == REDIS_REPLY_ARRAY &&
        (reply->elements < 1 || reply->element[0]->type != REDIS_REPLY_STRING ||
         strcmp(reply->element[0]->str, "master"))) {
        log_event(LOG_WARN, "redis node named by the sentinels is not a primary", NULL);
        return false;
    }
    return true;
}

const single_locator sentinel_locator = {sentinel_start, sentinel_find,  sentinel_check_argv,
                                         sentinel_check, sentinel_close, sentinel_free};
