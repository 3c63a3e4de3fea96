/* cors: CORS_ORIGINS, matched against the Origin header of each request. */
#include "http/cors.h"

#include <llhttp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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
    /* Credentials only with an exact origin: browsers refuse them beside "*", and "*" would
     * grant every site the caller's session. */
    snprintf(out, sizeof out,
             "Access-Control-Allow-Origin: %s\r\n"
             "%s"
             "Access-Control-Expose-Headers: X-Request-Id, Retry-After, traceparent\r\n"
             "Vary: Origin\r\n",
             wildcard ? "*" : req->origin,
             wildcard ? "" : "Access-Control-Allow-Credentials: true\r\n");
    return out;
}

/* The service's own origin, "scheme://host[:port]" of AUTH_URI (the address users sign in to),
 * or https://AUTH_DOMAIN without one; a default port is left out, as browsers send it. Writes
 * "" when it cannot be told. */
static void own_origin(const request *req, char *out, size_t cap)
{
    out[0] = '\0';
    if (!req->app)
        return;
    const char *uri = req->app->cfg.auth_uri;
    char fallback[REQ_ORIGIN_MAX + 1];
    if (!uri || !*uri) {
        const char *domain = req->app->cfg.auth_domain ? req->app->cfg.auth_domain : "";
        snprintf(fallback, sizeof fallback, "https://%s", domain);
        uri = fallback;
    }
    const char *host = strstr(uri, "://");
    if (!host)
        return;
    host += 3;
    size_t len = (size_t)(host - uri) + strcspn(host, "/?#");
    if (len >= cap)
        return;
    memcpy(out, uri, len);
    out[len] = '\0';
    if (!strncasecmp(out, "https://", 8) && len > 4 && !strcmp(out + len - 4, ":443"))
        out[len - 4] = '\0';
    else if (!strncasecmp(out, "http://", 7) && len > 3 && !strcmp(out + len - 3, ":80"))
        out[len - 3] = '\0';
}

bool cors_cookie_origin_ok(const request *req, bool signed_in_url)
{
    if (req->method == HTTP_GET || req->method == HTTP_HEAD)
        return true;
    /* Only a request whose one credential is the cookie: a browser attaches that by itself, a
     * Bearer header or a signature in the URL a page has to put there on purpose. */
    if (!req->session_cookie[0] && !req->cookie_bad)
        return true;
    if (req->bearer[0] || req->bearer_bad || signed_in_url)
        return true;
    /* Browsers send Origin with every request other than GET/HEAD, same-origin ones too; one
     * without it is no browser's, and a cookie is a browser's credential. */
    if (!req->origin[0])
        return false;
    bool wildcard;
    /* "*" is no list: it would let any site spend the cookie. */
    if (cors_enabled(req) && listed(origins(req), req->origin, &wildcard) && !wildcard)
        return true;
    char own[REQ_ORIGIN_MAX + 1];
    own_origin(req, own, sizeof own);
    return own[0] && !strcasecmp(own, req->origin);
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
