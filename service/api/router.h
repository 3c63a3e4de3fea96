/* router: path normalization and matching against the route table. */
#ifndef ENTITYD_ROUTER_H
#define ENTITYD_ROUTER_H

#include <stddef.h>

#include "auth/auth.h"
#include "http/request.h"

typedef void (*route_handler)(request *req);

typedef struct route {
    int method;          /* llhttp_method_t */
    const char *pattern; /* "/api/entities/{id}": a {name} segment matches one path segment */
    route_handler handler;
    int auth;  /* enum auth_mode (auth/auth.h) */
    int flags; /* ROUTE_* */
} route;

/* The handler sends its first read with request_read_flags (http/request.h), so the revocation
 * check may ride just ahead of it (one round trip) instead of coming first. Only for handlers
 * that change nothing. */
#define ROUTE_READ_WITH_REVOCATION 1
/* A signed write: it spends the caller's write budget (RATE_WRITES_PER_MINUTE) before its
 * handler runs. */
#define ROUTE_WRITE 2
/* The query's signature is the request's object, not only its sign-in (POST /api/auth/revoke
 * revokes it): credentials outside the URL do not stand in for it. */
#define ROUTE_SIGNATURE_ONLY 4
/* Which entity API keys (CONTRACT section 13) may call the route, on their own entity only:
 * keys of both scopes (award), or of scope admin only (what an admin may do). A route with
 * neither refuses a key with 403. */
#define ROUTE_KEY_AWARD 8
#define ROUTE_KEY_ADMIN 16

enum router_result { ROUTER_FOUND = 0, ROUTER_NOT_FOUND, ROUTER_METHOD_NOT_ALLOWED };

/* Collapses repeated slashes and drops one trailing slash, in place. Returns the new length. */
size_t router_normalize(char *path, size_t len);

/* Matches a normalized path. On ROUTER_FOUND, *out is the route and params point into path.
 * On ROUTER_METHOD_NOT_ALLOWED, allow gets "GET, POST"-style text. */
int router_match(const route *table, size_t n, int method, const char *path, size_t len,
                 const route **out, slice *params, size_t *nparams, char *allow, size_t allow_len);

#endif
