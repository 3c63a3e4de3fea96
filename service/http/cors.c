/* cors: CORS_ORIGINS, matched against the Origin header of each request. */
#include "http/cors.h"

#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "core/metrics.h"

static unsigned long long preflights[2]; /* [0] refused (origin not listed), [1] allowed */

static const char *origins(const request *req)
{
    return req->app && req->app->cfg.cors_origins ? req->app->cfg.cors_origins : "";
}

bool cors_enabled(const request *req)
{
    return origins(req)[0] != '\0';
}

/* Walks the comma-separated list; entries are trimmed. The list is short and read only for
 * requests that carry an Origin, so it is not kept parsed. */
static bool listed(const char *list, const char *origin, bool *wildcard)
{
    size_t olen = strlen(origin);
    *wildcard = false;
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *e = p;
        while (len && (*e == ' ' || *e == '\t')) {
            e++;
            len--;
        }
        while (len && (e[len - 1] == ' ' || e[len - 1] == '\t'))
            len--;
        if (len == 1 && *e == '*') {
            *wildcard = true;
            return true;
        }
        /* Origins compare exactly (scheme, host, port), as browsers send them. */
        if (olen && len == olen && !memcmp(e, origin, len))
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

bool cors_origin_allowed(const request *req)
{
    bool wildcard;
    return cors_enabled(req) && req->origin[0] && listed(origins(req), req->origin, &wildcard);
}

const char *cors_response_headers(const request *req)
{
    static char out[REQ_ORIGIN_MAX + 200];
    if (!cors_enabled(req) || !req->origin[0])
        return NULL;
    bool wildcard;
    if (!listed(origins(req), req->origin, &wildcard))
        /* Not a grant: the answer still depends on Origin, so caches must key on it. */
        return "Vary: Origin\r\n";
    snprintf(out, sizeof out,
             "Access-Control-Allow-Origin: %s\r\n"
             "Access-Control-Expose-Headers: X-Request-Id, Retry-After, traceparent\r\n"
             "Vary: Origin\r\n",
             wildcard ? "*" : req->origin);
    return out;
}

void cors_count_preflight(bool allowed)
{
    preflights[allowed ? 1 : 0]++;
}

static void cors_render_metrics(buf *out, void *ctx)
{
    (void)ctx;
    metrics_family(out, "entityd_http_preflights_total", "counter",
                   "CORS preflights answered, by whether their origin is listed.");
    buf_printf(out, "entityd_http_preflights_total{outcome=\"allowed\"} %llu\n", preflights[1]);
    buf_printf(out, "entityd_http_preflights_total{outcome=\"refused\"} %llu\n", preflights[0]);
}

void cors_register_metrics(void)
{
    metrics_register(cors_render_metrics, NULL);
}
