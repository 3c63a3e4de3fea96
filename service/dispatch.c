/* dispatch: from a parsed request to its handler: target, route, media type, sign-in. */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>

#include "app.h"
#include "auth.h"
#include "query.h"
#include "router.h"

static void run_handler(request *req)
{
    req->route->handler(req);
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
    switch (router_match(router_routes, router_routes_count, req->method, req->path, req->path_len,
                         &r, req->path_params, &req->npath_params, allow, sizeof allow)) {
    case ROUTER_NOT_FOUND:
        request_fail(req, 404, "not_found", "No such route.", NULL);
        return;
    case ROUTER_METHOD_NOT_ALLOWED:
        request_fail_allow(req, allow);
        return;
    }
    req->route = r;
    if (req->body_total > 0 && !req->json_content_type) {
        request_fail(req, 415, "unsupported_media_type",
                     "A request body must be sent as Content-Type: application/json.", NULL);
        return;
    }
    if (r->auth == AUTH_NONE)
        run_handler(req);
    else
        auth_authenticate(req, r->auth, run_handler);
}

void dispatch_request_reset(request *req)
{
    if (req->on_reset) {
        void (*fn)(void *) = req->on_reset;
        req->on_reset = NULL;
        fn(req->on_reset_data);
    }
    arena_reset(&req->pool);
    buf_reset(&req->url, 1024);
    buf_reset(&req->body, 1024);
    req->path = NULL;
    req->path_len = 0;
    req->params = NULL;
    req->nparams = 0;
    req->route = NULL;
    req->npath_params = 0;
    req->request_id[0] = '\0';
    req->has_content_type = req->json_content_type = false;
    req->expect_continue = false;
    req->body_total = 0;
    req->start_ns = 0;
    req->caller[0] = '\0';
    req->signed_in = false;
    req->answered = false;
    req->status = 0;
    req->state = NULL;
    req->revocation_key = NULL;
    req->auth_veto = 0;
    req->method = -1;
    req->auth = NULL;
}
