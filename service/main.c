/* main: wires configuration, logging, the Redis store, sign-in and the server onto one loop;
 * with WORKERS above 1, a supervisor forks that many such processes onto one port first. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "jobs/attester.h"
#include "jobs/backfill.h"
#include "api/dispatch.h"
#include "resources/handlers.h"
#include "resources/routes.h"
#include "auth/auth.h"
#include "auth/limits.h"
#include "cache/findcache.h"
#include "cache/pagecache.h"
#include "cache/readcache.h"
#include "core/app.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/metrics_shared.h"
#include "core/version.h"
#include "core/workers.h"
#include "http/http.h"
#include "jobs/erasure.h"
#include "jobs/joinsweep.h"
#include "rpc/joinread.h"
#include "jobs/sweeper.h"
#include "api/joinrule_eval.h"
#include "push/webhook.h"
#include "net/server.h"
#include "redis/group.h"
#include "redis/store.h"
#include "redis/tracking.h"
#include "push/streams.h"
#include "push/watch.h"

static app the_app;
static server the_server;
static http_service the_service = {.app = &the_app, .dispatch = dispatch_request};
static uv_signal_t sig_term, sig_int;
static uv_timer_t log_timer, metrics_timer, start_timer;
static int worker_index = -1; /* this process's worker index; -1 without a supervisor */
static server_options server_opts;
static bool listening;
static uint64_t listen_by; /* loop ms: the port opens then even if Redis is not ready */

static void on_log_timer(uv_timer_t *t)
{
    (void)t;
    log_flush();
}

/* Other workers render this one's figures from its shared slot: keep it at most 1 s old. */
static void on_metrics_timer(uv_timer_t *t)
{
    (void)t;
    metrics_shared_publish();
}

/* The attester's key is wiped however the process ends after it was read (a start that fails
 * later returns from main too). */
static void wipe_attester(void)
{
    attester_free(the_app.attester);
    the_app.attester = NULL;
}

static void on_worker_exit(int index)
{
    metrics_shared_clear((size_t)index);
}

/* The re-check's rule from its stored JSON (jobs/joinsweep.h): the rule is the api's, above
 * the jobs in the layers. */
static int joinsweep_rule_build(void *ctx, const char *json, size_t len, const char *author,
                                joinsweep_rule *out)
{
    app *a = ctx;
    joinrule *r = malloc(sizeof *r);
    if (!r || joinrule_eval_parse(json, len, r) != 0) {
        free(r);
        return -1;
    }
    joinrule_eval_fill(r, author, auth_is_platform_admin(a->auth, author), &out->eval);
    out->tree_mem = r; /* out->eval.tree points at it */
    for (int i = 0; i < r->leaves && i < JOINEVAL_MAX_LEAVES; i++)
        snprintf(out->path[i], sizeof out->path[i], "%s", r->node[r->leaf_node[i]].path);
    return 0;
}

/* The leases are handed back: now the store may close. */
static void on_limits_closed(void *ctx)
{
    server *srv = ctx;
    app *a = &the_app;
    auth_close(a->auth);
    backfill_stop();
    group_close(a->groups);
    erasure_close(a->erasure);
    sweeper_close(a->sweeper);
    joinsweep_close(a->joinsweep);
    joinread_close(a->joinread);
    webhooks_close(a->webhooks);
    streams_close(a->streams);
    watch_close(a->watch);
    store_close(a->store);
    tracking_close(a->tracking);
    server_close(srv);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&log_timer, NULL);
    if (worker_index >= 0)
        uv_close((uv_handle_t *)&metrics_timer, NULL);
    log_close();
}

static void on_drained(server *srv)
{
    log_event(LOG_INFO, "drained: closing", NULL);
    /* Units leased and not spent go back to Redis first, so that other instances may spend
     * them at once rather than as the budget refills. */
    limits_close(the_app.limits, on_limits_closed, srv);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    if (the_server.draining)
        return;
    log_event(LOG_INFO, "shutdown requested: draining", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    log_flush();
    if (!listening) {
        /* Stopped while it waited for Redis: nothing to drain. */
        the_server.draining = 1;
        uv_close((uv_handle_t *)&start_timer, NULL);
        on_drained(&the_server);
        return;
    }
    /* Streams end at once (what they hold is still written): a drain waits for no one's
     * stream. */
    streams_close(the_app.streams);
    server_drain(&the_server);
}

static void listen_now(app *a)
{
    int rc = server_start(&the_server, a->loop, &server_opts);
    if (rc != 0) {
        fprintf(stderr, "entityd: cannot listen on %s:%lld: %s\n", a->cfg.host,
                (long long)a->cfg.port, uv_strerror(rc));
        exit(1);
    }
    listening = true;
    the_server.on_drained = on_drained;
    if (worker_index >= 0)
        metrics_shared_publish(); /* with the connections' figures, before "listening" says so */
    buf *l = log_begin(LOG_INFO, "listening");
    if (l) {
        log_str(l, "version", ENTITYD_VERSION);
        log_str(l, "host", a->cfg.host);
        log_int(l, "port", the_server.port);
        if (worker_index >= 0) {
            log_int(l, "worker", worker_index);
            log_int(l, "pid", getpid());
        }
        log_end(l);
    }
    log_flush();
}

/* The port opens once Redis is ready, so that a gateway sending an instance requests as soon
 * as it accepts (a rolling restart) never gets the 503 of a store still connecting; without
 * Redis by STARTUP_WAIT_MS it opens anyway and answers 503 while Redis is down. */
static void on_start_timer(uv_timer_t *t)
{
    app *a = t->data;
    if (!store_ready(a->store) && uv_now(a->loop) < listen_by)
        return;
    uv_close((uv_handle_t *)t, NULL);
    listen_now(a);
}

/* Many idle keep-alive connections need many descriptors: take what the hard limit allows. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* With several workers: reserves the port, maps the metrics segment, forks and supervises.
 * Returns -1 in a worker (which goes on to serve *port), or the supervisor's exit status. */
static int supervise(app *a, int workers, int *port)
{
    int reserve_fd, rc = server_reserve_port(a->cfg.host, (int)a->cfg.port, &reserve_fd, port);
    if (rc != 0) {
        fprintf(stderr, "entityd: cannot bind %s:%lld: %s\n", a->cfg.host, (long long)a->cfg.port,
                strerror(-rc));
        return 1;
    }
    if (metrics_shared_init((size_t)workers) != 0) {
        fprintf(stderr, "entityd: cannot map the workers' metrics: %s\n", strerror(errno));
        close(reserve_fd);
        return 1;
    }
    workers_options wo = {.count = workers,
                          .shutdown_timeout_ms = (uint64_t)a->cfg.shutdown_timeout_ms,
                          .on_exit = on_worker_exit};
    int out;
    rc = workers_supervise(&wo, &out);
    close(reserve_fd);
    if (rc == WORKERS_DONE)
        return out;
    worker_index = out;
    metrics_shared_join((size_t)out);
    return -1;
}

int main(int argc, char **argv)
{
    char err[256];
    app *a = &the_app;
    int rc = config_load(&a->cfg, argc, argv, err, sizeof err);
    if (rc == CONFIG_EXIT_OK) {
        config_free(&a->cfg);
        return 0;
    }
    if (rc != CONFIG_OK) {
        fprintf(stderr, "entityd: %s\n", err);
        config_free(&a->cfg);
        return 2;
    }
    atexit(wipe_attester);
    log_set_level(log_level_parse(a->cfg.log_level));
    /* The attester's key is checked before anything starts: a bad key file stops the process
     * like a bad setting. */
    bool dev_key;
    if (attester_new(&a->attester, &a->cfg, &dev_key, err, sizeof err) != 0) {
        fprintf(stderr, "entityd: %s\n", err);
        config_free(&a->cfg);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    int port = (int)a->cfg.port, workers = workers_parse(a->cfg.workers);
    if (workers > 1) {
        rc = supervise(a, workers, &port);
        if (rc >= 0) {
            config_free(&a->cfg);
            return rc;
        }
    }
    a->loop = uv_default_loop();
    a->server = &the_server;
    log_init(a->loop, STDOUT_FILENO, (size_t)a->cfg.log_buffer_bytes);

    if (a->cfg.dev && !*a->cfg.auth_secret)
        log_event(LOG_WARN, "dev mode: using a fixed, public AUTH_SECRET; never in production",
                  NULL);
    if (dev_key)
        log_event(LOG_WARN,
                  "dev mode: attestations are signed with a fixed, public key; they prove nothing",
                  attester_address(a->attester));
    else if (a->attester)
        log_event(LOG_INFO, "attestations enabled", attester_address(a->attester));
    if (auth_new(&a->auth, a, err, sizeof err) != 0 || store_new(&a->store, a, err, sizeof err)) {
        fprintf(stderr, "entityd: %s\n", err);
        return 1;
    }
    if (joinread_new(&a->joinread, a->loop, &a->cfg, err, sizeof err) != 0) {
        fprintf(stderr, "entityd: %s\n", err);
        return 1;
    }
    a->groups = group_new(a->loop, a->store);
    if (!a->groups) {
        fprintf(stderr, "entityd: cannot set up the script groups: out of memory\n");
        return 1;
    }
    if (limits_new(&a->limits, a) != 0) {
        fprintf(stderr, "entityd: cannot set up the write-budget leases: out of memory\n");
        return 1;
    }
    a->pages = pagecache_new((size_t)a->cfg.page_cache_size, PAGECACHE_MAX_BODY);
    if (a->cfg.read_cache_mb > 0) {
        a->reads = readcache_new((size_t)a->cfg.read_cache_mb << 20);
        if (a->reads)
            a->tracking = tracking_new(a);
    }
    a->finds = findcache_new((size_t)a->cfg.find_cache_mb << 20, a->reads);
    metrics_register(pagecache_render_metrics, a->pages);
    metrics_register(readcache_render_metrics, a->reads);
    metrics_register(findcache_render_metrics, a->finds);
    a->erasure = erasure_new(a);
    if (!a->erasure) {
        fprintf(stderr, "entityd: cannot set up the erasure of deleted entities\n");
        return 1;
    }
    metrics_register(erasure_render_metrics, a->erasure);
    a->sweeper = sweeper_new(a);
    if (!a->sweeper) {
        fprintf(stderr, "entityd: cannot set up the sweeper of removed members\n");
        return 1;
    }
    metrics_register(sweeper_render_metrics, a->sweeper);
    a->joinsweep = joinsweep_new(a, a->joinread, joinsweep_rule_build, a);
    if (!a->joinsweep) {
        fprintf(stderr, "entityd: cannot set up the re-check of rules members\n");
        return 1;
    }
    metrics_register(joinsweep_render_metrics, a->joinsweep);
    a->watch = watch_new(a);
    a->streams = a->watch ? streams_new(a, a->watch) : NULL;
    if (!a->streams) {
        fprintf(stderr, "entityd: cannot set up the event streams: out of memory\n");
        return 1;
    }
    streams_set_check(a->streams, events_stream_check, a);
    metrics_register(streams_render_metrics, a->streams);
    a->webhooks = webhooks_new(a);
    if (!a->webhooks) {
        fprintf(stderr, "entityd: cannot set up webhook deliveries\n");
        return 1;
    }
    metrics_register(webhooks_render_metrics, a->webhooks);
    backfill_start(a);
    dispatch_init(router_routes, router_routes_count);
    server_opts = (server_options){
        .host = a->cfg.host,
        .port = port,
        .proto = &http_protocol,
        .proto_ctx = &the_service,
        .limits = {.header_timeout_ms = (uint64_t)a->cfg.header_timeout_ms,
                   .idle_timeout_ms = (uint64_t)a->cfg.idle_timeout_ms,
                   .write_timeout_ms = (uint64_t)a->cfg.write_timeout_ms,
                   .write_buffer_bytes = (size_t)a->cfg.write_buffer_bytes,
                   .max_connections = (size_t)a->cfg.max_connections,
                   .drain_idle_grace_ms = (uint64_t)a->cfg.shutdown_idle_grace_ms},
        .shutdown_timeout_ms = (uint64_t)a->cfg.shutdown_timeout_ms,
        .reuseport = worker_index >= 0,
    };
    uv_timer_init(a->loop, &start_timer);
    start_timer.data = a;
    listen_by = uv_now(a->loop) + (uint64_t)a->cfg.startup_wait_ms;
    uv_timer_start(&start_timer, on_start_timer, 0, 5);

    uv_signal_init(a->loop, &sig_term);
    uv_signal_init(a->loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_timer_init(a->loop, &log_timer);
    uv_timer_start(&log_timer, on_log_timer, 200, 200);
    if (worker_index >= 0) {
        metrics_shared_publish();
        uv_timer_init(a->loop, &metrics_timer);
        uv_timer_start(&metrics_timer, on_metrics_timer, 1000, 1000);
    }

    uv_run(a->loop, UV_RUN_DEFAULT);

    /* Everything still waiting goes out now, unless stdout stays stalled past this; then the
     * last line, which a full buffer would otherwise have dropped. */
    log_finish(1000);
    log_event(LOG_INFO, "stopped", NULL);
    log_finish(1000);
    group_free(a->groups);
    erasure_free(a->erasure);
    sweeper_free(a->sweeper);
    joinsweep_free(a->joinsweep);
    joinread_free(a->joinread);
    webhooks_free(a->webhooks);
    streams_free(a->streams);
    watch_free(a->watch);
    store_free(a->store);
    limits_free(a->limits);
    auth_free(a->auth);
    wipe_attester();
    pagecache_free(a->pages);
    tracking_free(a->tracking);
    findcache_free(a->finds);
    readcache_free(a->reads);
    uv_loop_close(a->loop);
    config_free(&a->cfg);
    return 0;
}
