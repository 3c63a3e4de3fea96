/* dispatch: from a parsed request to its handler: target, route, media type, sign-in. */
#ifndef ENTITYD_DISPATCH_H
#define ENTITYD_DISPATCH_H

#include "http/request.h"

/* Names the route table's metrics slots (core/metrics.h); once, before serving. */
void dispatch_init(void);
/* Routes a complete request; its answer may come now or later, exactly once. */
void dispatch_request(request *req);

#endif
