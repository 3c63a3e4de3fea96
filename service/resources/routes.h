/* routes: the route table (routes.c), handed to dispatch at start (api/dispatch.h). */
#ifndef ENTITYD_ROUTES_H
#define ENTITYD_ROUTES_H

#include <stddef.h>

#include "api/router.h"

extern const route router_routes[];
extern const size_t router_routes_count;

#endif
