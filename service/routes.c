/* routes: the route table, the one place every method, path, handler and auth need is listed. */
#include <llhttp.h>

#include "handlers.h"
#include "router.h"

const route router_routes[] = {
    {HTTP_GET, "/healthz", health_live, AUTH_NONE},
    {HTTP_GET, "/readyz", health_ready, AUTH_NONE},
    {HTTP_GET, "/api/auth/message", auth_message_get, AUTH_NONE},
    {HTTP_POST, "/api/auth/revoke", auth_revoke_post, AUTH_REQUIRED},
};

const size_t router_routes_count = sizeof router_routes / sizeof router_routes[0];
