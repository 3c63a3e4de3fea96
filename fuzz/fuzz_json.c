/* fuzz_json: arbitrary JSON bodies through every write route's handler: body parsing and
 * validation (entities, force-add, admins, one or many skills, levels, contribution awards and
 * revocations), as a signed-in caller,
 * with Redis closed. A valid body reaches the store and gets 503; anything else must be a 4xx
 * with the contract's envelope, never a 500 or a crash, and must leave nothing allocated.
 *
 * Input: byte 0 picks the route (bits 0-2, or with bit 4 set bit 0 among the contribution
 * routes) and the caller (bit 3: a platform admin, else a stranger); the rest is the body. The
 * request is built as dispatch.c would have built it after a successful sign-in, and the route's
 * handler is called directly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inproc.h"
#include "http/query.h"
#include "http/request.h"
#include "api/router.h"
#include "resources/routes.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EID "c-7b0e4a52-3d1c-4f6e-9a8b-0c1d2e3f4a5b"

static const char *const targets[8] = {
    "/api/entities",
    "/api/entities?entityID=" EID,
    "/api/entities/" EID "/force-add",
    "/api/entities/" EID "/admins",
    "/api/skills",
    "/api/skills?multiple=true",
    "/api/skills/multiple",
    "/api/entities/" EID "/levels/level_1-A/update",
};

static const char *const contrib_targets[2] = {
    "/api/entities/" EID "/contributions",
    "/api/entities/" EID "/contributions/k-1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f/revoke",
};

/* A valid body gets 503 from the closed store; 403 and 409 are decided before the store. */
static const int allowed[] = {400, 403, 409, 503, 0};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    inproc_init("1048576");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *url = (data[0] & 16) ? contrib_targets[data[0] & 1] : targets[data[0] & 7];
    const char *caller = (data[0] & 8) ? INPROC_PLATFORM_ADMIN : INPROC_STRANGER;
    data++;
    size--;

    http_conn *c = inproc_conn_open();
    request *req = &c->req;
    /* What the parser and dispatch.c leave in the request. */
    req->method = HTTP_POST;
    req->start_ns = request_now_ns();
    buf_append(&req->url, url, strlen(url));
    buf_append(&req->body, data, size);
    req->body_total = size;
    req->has_content_type = req->json_content_type = true;
    const char *q = strchr(url, '?');
    size_t plen = q ? (size_t)(q - url) : strlen(url);
    req->path = arena_strndup(&req->pool, url, plen);
    req->path_len = router_normalize(req->path, plen);
    const char *bad = NULL;
    if (q && query_parse(&req->pool, q + 1, strlen(q + 1), &req->params, &req->nparams, &bad))
        abort();
    const route *r = NULL;
    char allow[64];
    if (router_match(router_routes, router_routes_count, req->method, req->path, req->path_len, &r,
                     req->path_params, &req->npath_params, allow, sizeof allow) != ROUTER_FOUND)
        abort();
    req->route = r;
    req->route_name = r->pattern;
    req->route_slot = (int)(r - router_routes);
    /* Signed in. */
    memcpy(req->caller, caller, 43);
    req->signed_in = true;
    conn_hold(&c->base);
    r->handler(req);

    inproc_pump();
    if (inproc_conn_finish(c, allowed) != 1)
        abort(); /* exactly one answer */
    return 0;
}
