/* metrics: the registry; request counters per route slot and status, then every registered
 * source. Recording a request is two array increments and no allocation. */
#include "core/metrics.h"

#include <string.h>

#include "core/log.h"
#include "core/version.h"

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

static route_metrics per_route[MAX_ROUTES + 1]; /* [nroutes]: unmatched */
static const char *const *route_labels;
static size_t nroutes;

#define MAX_SOURCES 16
static struct {
    metrics_source fn;
    void *ctx;
} sources[MAX_SOURCES];
static size_t nsources;

int metrics_register(metrics_source fn, void *ctx)
{
    if (nsources == MAX_SOURCES)
        return -1;
    sources[nsources].fn = fn;
    sources[nsources].ctx = ctx;
    nsources++;
    return 0;
}

void metrics_reset_sources(void)
{
    nsources = 0;
}

void metrics_set_routes(const char *const *labels, size_t n)
{
    route_labels = labels;
    nroutes = n < MAX_ROUTES ? n : MAX_ROUTES;
}

void metrics_observe_request(int slot, int status, double seconds)
{
    size_t i = slot >= 0 && (size_t)slot < nroutes ? (size_t)slot : nroutes;
    route_metrics *m = &per_route[i];
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

static void labels(buf *out, size_t slot)
{
    if (slot < nroutes)
        buf_append_str(out, route_labels[slot]);
    else
        buf_append_str(out, "route=\"unmatched\",method=\"any\"");
}

void metrics_counter(buf *out, const char *name, const char *help, uint64_t v)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
               (unsigned long long)v);
}

void metrics_gauge(buf *out, const char *name, const char *help, double v)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

void metrics_render_process(buf *out)
{
    size_t nslots = nroutes + 1;
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
    metrics_counter(out, "entityd_log_lines_dropped_total",
                    "Log lines dropped: stdout did not take them and LOG_BUFFER_BYTES was full.",
                    log_dropped_lines());
    for (size_t i = 0; i < nsources; i++)
        sources[i].fn(out, sources[i].ctx);
}

static metrics_renderer renderer;

void metrics_set_renderer(metrics_renderer fn)
{
    renderer = fn;
}

void metrics_render(buf *out)
{
    if (renderer)
        renderer(out);
    else
        metrics_render_process(out);
}

void metrics_family(buf *out, const char *name, const char *type, const char *help)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_counter_by(buf *out, const char *name, const char *help, const char *label,
                        const metrics_labelled *items, size_t n)
{
    metrics_family(out, name, "counter", help);
    for (size_t i = 0; i < n; i++)
        buf_printf(out, "%s{%s=\"%s\"} %llu\n", name, label, items[i].value,
                   (unsigned long long)items[i].v);
}
