/* dispatch: from a parsed request to its handler: target, route, media type, sign-in. */
#ifndef ENTITYD_DISPATCH_H
#define ENTITYD_DISPATCH_H

#include "request.h"

/* Routes a complete request; its answer may come now or later, exactly once. */
void dispatch_request(request *req);
/* Releases what the request holds and readies it for the next one on the connection. */
void dispatch_request_reset(request *req);

#endif
