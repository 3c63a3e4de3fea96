/* dispatch: from a parsed request to its handler: target, route, media type, sign-in. */
#include "api/dispatch.h"

#include <llhttp.h>
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "core/metrics.h"
#include "auth/auth.h"
#include "http/cors.h"
#include "http/query.h"
#include "api/router.h"

static void run_handler(request *req)
{
    req->route->handler(req);
}

#define MAX_LABEL 160
/* How long a browser may keep a preflight's answer. */
#define CORS_MAX_AGE_SECONDS 600

static const route *routes;
static size_t routes_n;

void dispatch_init(const route *table, size_t n_routes)
{
    routes = table;
    routes_n = n_routes;
    static char text[64][MAX_LABEL];
    static const char *labels[64];
    size_t n = routes_n < 64 ? routes_n : 64;
    for (size_t i = 0; i < n; i++) {
        snprintf(text[i], MAX_LABEL, "route=\"%s\",method=\"%s\"", routes[i].pattern,
                 llhttp_method_name((llhttp_method_t)routes[i].method));
        labels[i] = text[i];
    }
    metrics_set_routes(labels, n);
    cors_register_metrics();
}

/* A CORS preflight (or any OPTIONS) on a known path, when CORS_ORIGINS is set: 204 with what
 * the path allows. The grant itself, Access-Control-Allow-Origin, is added to the answer for a
 * listed origin only (http/cors.c), so an unlisted one gets no CORS headers. */
static void answer_preflight(request *req, const char *allow)
{
    char extra[384];
    bool allowed = cors_origin_allowed(req);
    if (req->preflight)
        cors_count_preflight(allowed);
    if (allowed)
        snprintf(extra, sizeof extra,
                 "Allow: %s\r\nAccess-Control-Allow-Methods: %s\r\n"
                 "Access-Control-Allow-Headers: Authorization, Content-Type, X-Request-Id, "
                 "traceparent\r\n"
                 "Access-Control-Max-Age: %d\r\n",
                 allow, allow, CORS_MAX_AGE_SECONDS);
    else
        snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
    request_reply_empty(req, extra);
}

void dispatch_request(request *req)
{
    const char *url = buf_cstr(&req->url);
    size_t len = req->url.len;
    if (len == 0 || url[0] != '/') {
        request_fail(req, 400, "invalid_request", "The request target must be a path.", NULL);
        return;
    }
    const char *q = memchr(url, '?', len);
    size_t plen = q ? (size_t)(q - url) : len;
    req->path = arena_strndup(&req->pool, url, plen);
    if (!req->path) {
        request_fail_internal(req, "out of memory");
        return;
    }
    req->path_len = router_normalize(req->path, plen);

    const char *bad_key = NULL;
    int qerr =
        q ? query_parse(&req->pool, q + 1, len - plen - 1, &req->params, &req->nparams, &bad_key)
          : QUERY_OK;
    char field[200];
    if (bad_key)
        request_printable(bad_key, strlen(bad_key), field, sizeof field);
    if (qerr == QUERY_EREPEATED) {
        request_fail(req, 400, "invalid_request", "A query parameter is given more than once.",
                     bad_key ? field : NULL);
        return;
    }
    if (qerr == QUERY_EENCODING) {
        request_fail(req, 400, "invalid_request", "The query string has an invalid %-escape.",
                     bad_key ? field : NULL);
        return;
    }
    if (qerr != QUERY_OK) {
        request_fail_internal(req, "out of memory");
        return;
    }

    char allow[64];
    const route *r = NULL;
    switch (router_match(routes, routes_n, req->method, req->path, req->path_len, &r,
                         req->path_params, &req->npath_params, allow, sizeof allow)) {
    case ROUTER_NOT_FOUND:
        request_fail(req, 404, "not_found", "No such route.", NULL);
        return;
    case ROUTER_METHOD_NOT_ALLOWED:
        if (req->method == HTTP_OPTIONS && cors_enabled(req))
            answer_preflight(req, allow);
        else
            request_fail_allow(req, allow);
        return;
    }
    req->route = r;
    req->route_name = r->pattern;
    req->route_slot = (int)(r - routes);
    /* Before anything is spent (section 12): a cross-site page must not be able to make the
     * browser's cookie act for it. */
    if (!cors_cookie_origin_ok(req, request_param(req, "signature", NULL) != NULL)) {
        request_fail(req, 403, "forbidden",
                     "A request signed in by cookie must come from a listed origin.", NULL);
        return;
    }
    if (req->body_total > 0 && !req->json_content_type) {
        request_fail(req, 415, "unsupported_media_type",
                     "A request body must be sent as Content-Type: application/json.", NULL);
        return;
    }
    if (r->auth == AUTH_NONE)
        run_handler(req);
    else
        auth_authenticate(req, r->auth,
                          ((r->flags & ROUTE_READ_WITH_REVOCATION) ? AUTH_DEFERRED_REVOCATION : 0) |
                              ((r->flags & ROUTE_WRITE) ? AUTH_WRITE_BUDGET : 0) |
                              ((r->flags & ROUTE_SIGNATURE_ONLY) ? AUTH_SIGNATURE_ONLY : 0) |
                              ((r->flags & ROUTE_KEY_AWARD) ? AUTH_KEY_AWARD : 0) |
                              ((r->flags & ROUTE_KEY_ADMIN) ? AUTH_KEY_ADMIN : 0),
                          run_handler);
}
