/* dispatch: from a parsed request to its handler: target, route, media type, sign-in. */
#ifndef ENTITYD_DISPATCH_H
#define ENTITYD_DISPATCH_H

#include "api/router.h"
#include "http/request.h"

/* Takes the route table (resources/routes.h: the layer above names the handlers) and names its
 * metrics slots (core/metrics.h); once, before serving. */
void dispatch_init(const route *table, size_t n);
/* Routes a complete request; its answer may come now or later, exactly once. */
void dispatch_request(request *req);

#endif
