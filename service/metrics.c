/* metrics: counters and histograms kept on the loop, rendered in Prometheus text format.
 * Requests are counted per route of the table (plus one slot for unmatched ones) and status,
 * so recording is two array increments and no allocation. */
#include "metrics.h"

#include <llhttp.h>
#include <string.h>

#include "app.h"
#include "auth.h"
#include "log.h"
#include "pagecache.h"
#include "readcache.h"
#include "router.h"
#include "server.h"
#include "store.h"
#include "version.h"

#define MAX_ROUTES 64
static const int statuses[] = {200, 201, 400, 401, 403, 404, 405, 409,
                               413, 414, 415, 431, 500, 503, 504};
#define NSTATUS (sizeof statuses / sizeof statuses[0])
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

typedef struct route_metrics {
    uint64_t by_status[NSTATUS + 1]; /* last: any other status */
    uint64_t buckets[NBOUNDS];       /* not cumulative here; summed when rendered */
    uint64_t count;
    double sum;
} route_metrics;

static route_metrics per_route[MAX_ROUTES + 1]; /* [router_routes_count]: unmatched */
static uint64_t conns_open, conns_total, conns_rejected, conns_read_timeouts, conns_write_timeouts;

static size_t route_slot(const route *r)
{
    if (!r)
        return router_routes_count < MAX_ROUTES ? router_routes_count : MAX_ROUTES;
    size_t i = (size_t)(r - router_routes);
    return i < MAX_ROUTES ? i : MAX_ROUTES;
}

void metrics_observe_request(const route *r, int method, int status, double seconds)
{
    (void)method;
    route_metrics *m = &per_route[route_slot(r)];
    size_t s = 0;
    while (s < NSTATUS && statuses[s] != status)
        s++;
    m->by_status[s]++;
    m->count++;
    m->sum += seconds;
    for (size_t b = 0; b < NBOUNDS; b++)
        if (seconds <= bounds[b]) {
            m->buckets[b]++;
            break;
        }
}

void metrics_connection_opened(void)
{
    conns_open++;
    conns_total++;
}

void metrics_connection_closed(void)
{
    conns_open--;
}

void metrics_connection_rejected(void)
{
    conns_rejected++;
}

void metrics_connection_timed_out(bool write)
{
    if (write)
        conns_write_timeouts++;
    else
        conns_read_timeouts++;
}

static void labels(buf *out, size_t slot)
{
    if (slot < router_routes_count && slot < MAX_ROUTES)
        buf_printf(out, "route=\"%s\",method=\"%s\"", router_routes[slot].pattern,
                   llhttp_method_name((llhttp_method_t)router_routes[slot].method));
    else
        buf_append_str(out, "route=\"unmatched\",method=\"any\"");
}

static void counter(buf *out, const char *name, const char *help, uint64_t v)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
               (unsigned long long)v);
}

static void gauge(buf *out, const char *name, const char *help, double v)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

void metrics_render(buf *out, app *a)
{
    size_t nslots = (router_routes_count < MAX_ROUTES ? router_routes_count : MAX_ROUTES) + 1;
    buf_printf(out,
               "# HELP entityd_build_info Build information.\n# TYPE entityd_build_info "
               "gauge\nentityd_build_info{version=\"%s\"} 1\n",
               ENTITYD_VERSION);
    buf_append_str(out, "# HELP entityd_http_requests_total Answered requests by route "
                        "template, method and status.\n# TYPE entityd_http_requests_total "
                        "counter\n");
    for (size_t r = 0; r < nslots; r++)
        for (size_t s = 0; s <= NSTATUS; s++) {
            if (!per_route[r].by_status[s])
                continue;
            buf_append_str(out, "entityd_http_requests_total{");
            labels(out, r);
            if (s < NSTATUS)
                buf_printf(out, ",status=\"%d\"} %llu\n", statuses[s],
                           (unsigned long long)per_route[r].by_status[s]);
            else
                buf_printf(out, ",status=\"other\"} %llu\n",
                           (unsigned long long)per_route[r].by_status[s]);
        }
    buf_append_str(out, "# HELP entityd_http_request_duration_seconds Time from the first byte "
                        "of a request to its answer, by route.\n# TYPE "
                        "entityd_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r < nslots; r++) {
        if (!per_route[r].count)
            continue;
        uint64_t cum = 0;
        for (size_t b = 0; b < NBOUNDS; b++) {
            cum += per_route[r].buckets[b];
            buf_append_str(out, "entityd_http_request_duration_seconds_bucket{");
            labels(out, r);
            buf_printf(out, ",le=\"%g\"} %llu\n", bounds[b], (unsigned long long)cum);
        }
        buf_append_str(out, "entityd_http_request_duration_seconds_bucket{");
        labels(out, r);
        buf_printf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)per_route[r].count);
        buf_append_str(out, "entityd_http_request_duration_seconds_sum{");
        labels(out, r);
        buf_printf(out, "} %.9f\n", per_route[r].sum);
        buf_append_str(out, "entityd_http_request_duration_seconds_count{");
        labels(out, r);
        buf_printf(out, "} %llu\n", (unsigned long long)per_route[r].count);
    }
    gauge(out, "entityd_http_connections_open", "Client connections open now.", (double)conns_open);
    counter(out, "entityd_http_connections_total", "Client connections accepted.", conns_total);
    counter(out, "entityd_http_connections_rejected_total",
            "Connections answered 503 for being over MAX_CONNECTIONS.", conns_rejected);
    buf_append_str(out, "# HELP entityd_http_connections_timed_out_total Connections closed for a "
                        "deadline: read (header, body, idle) or write (a client not reading).\n"
                        "# TYPE entityd_http_connections_timed_out_total counter\n");
    buf_printf(out, "entityd_http_connections_timed_out_total{deadline=\"read\"} %llu\n",
               (unsigned long long)conns_read_timeouts);
    buf_printf(out, "entityd_http_connections_timed_out_total{deadline=\"write\"} %llu\n",
               (unsigned long long)conns_write_timeouts);

    const store_stats *st = store_get_stats(a->store);
    gauge(out, "entityd_redis_connected", "1 when Redis is connected and the scripts are loaded.",
          store_ready(a->store) ? 1 : 0);
    counter(out, "entityd_redis_commands_total", "Commands sent to Redis.", st->commands);
    counter(out, "entityd_redis_errors_total", "Error replies from Redis.", st->errors);
    counter(out, "entityd_redis_timeouts_total", "Commands past REDIS_TIMEOUT_MS.", st->timeouts);
    counter(out, "entityd_redis_connects_total", "Connection attempts to Redis.", st->reconnects);
    counter(out, "entityd_redis_disconnects_total", "Redis connections lost.", st->disconnects);
    gauge(out, "entityd_redis_pending_commands",
          "Commands sent to Redis and not yet answered (capped by REDIS_MAX_PENDING).",
          (double)store_pending(a->store));
    counter(out, "entityd_redis_shed_total",
            "Commands or transactions refused at once (503) for REDIS_MAX_PENDING; nothing sent.",
            st->shed);

    const auth_stats *au = auth_get_stats(a->auth);
    buf_append_str(out, "# HELP entityd_auth_signature_checks_total Sign-in checks by "
                        "outcome.\n# TYPE entityd_auth_signature_checks_total counter\n");
    const struct {
        const char *name;
        uint64_t v;
    } outcomes[] = {{"ok", au->ok},
                    {"missing", au->missing},
                    {"malformed", au->malformed},
                    {"mismatch", au->mismatch},
                    {"expired", au->expired},
                    {"revoked", au->revoked}};
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        buf_printf(out, "entityd_auth_signature_checks_total{outcome=\"%s\"} %llu\n",
                   outcomes[i].name, (unsigned long long)outcomes[i].v);
    counter(out, "entityd_auth_cache_hits_total", "Signatures answered from the cache.",
            au->cache_hits);
    counter(out, "entityd_auth_recoveries_total", "Signature recoveries queued on the threadpool.",
            au->queued);
    gauge(out, "entityd_auth_threadpool_queue_depth",
          "Signature recoveries waiting or running on the threadpool.", (double)au->queue_depth);

    pagecache_stats ps = pagecache_get_stats(a->pages);
    buf_append_str(out, "# HELP entityd_users_page_cache_total Users page reads by cache "
                        "outcome.\n# TYPE entityd_users_page_cache_total counter\n");
    buf_printf(out,
               "entityd_users_page_cache_total{outcome=\"hit\"} %llu\n"
               "entityd_users_page_cache_total{outcome=\"miss\"} %llu\n"
               "entityd_users_page_cache_total{outcome=\"stale\"} %llu\n",
               (unsigned long long)ps.hits, (unsigned long long)ps.misses,
               (unsigned long long)ps.stale);

    readcache_stats none = {0};
    const readcache_stats *rs = a->reads ? readcache_get_stats(a->reads) : &none;
    buf_append_str(out, "# HELP entityd_read_cache_total Reads through the read cache by "
                        "outcome.\n# TYPE entityd_read_cache_total counter\n");
    buf_printf(out,
               "entityd_read_cache_total{outcome=\"hit\"} %llu\n"
               "entityd_read_cache_total{outcome=\"miss\"} %llu\n"
               "entityd_read_cache_total{outcome=\"stale\"} %llu\n",
               (unsigned long long)rs->hits, (unsigned long long)rs->misses,
               (unsigned long long)rs->stale);
    counter(out, "entityd_read_cache_invalidations_total",
            "Keys Redis (or a write of ours) said changed.", rs->invalidations);
    gauge(out, "entityd_read_cache_enabled",
          "1 while Redis delivers invalidations and the cache answers reads.",
          readcache_enabled(a->reads) ? 1 : 0);
    gauge(out, "entityd_read_cache_bytes", "Memory held by kept answers.", (double)rs->bytes);
    gauge(out, "entityd_read_cache_entries", "Answers kept.", (double)rs->entries);
    counter(out, "entityd_log_lines_dropped_total",
            "Log lines dropped: stdout did not take them and LOG_BUFFER_BYTES was full.",
            log_dropped_lines());
}
