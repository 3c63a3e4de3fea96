/* tracking: the second Redis connection, on which Redis tells this process which keys changed,
 * so that the read cache (readcache.h) can keep answers (Redis's client-side caching, RESP2
 * style: this connection subscribes to __redis__:invalidate, and the store's connection turns
 * on CLIENT TRACKING ... REDIRECT <this connection> OPTIN).
 *
 * The cache is on only while both hold: this connection is subscribed, and the store's
 * connection has confirmed its tracking points here. Losing either empties it and turns it off
 * until both hold again; so does a heartbeat (a PUBLISH sent on the store's connection to a
 * channel this one listens to) that does not come back in time: a silent connection must not
 * leave answers standing that nothing would invalidate. */
#ifndef ENTITYD_TRACKING_H
#define ENTITYD_TRACKING_H

#include "redis/invalidation.h"

struct app;
typedef struct tracking tracking;

/* Starts connecting (a->store must exist; a->reads is the cache it drives). NULL when out of
 * memory: the cache then stays off. */
/* Starts the invalidation connection and listens to the store (store_set_listener): when the
 * store is ready its tracking is pointed here; when its connection goes the cache goes off. */
tracking *tracking_new(struct app *a);
/* Closes the connection and timers, for a clean exit; the cache goes off. */
void tracking_close(tracking *tr);
/* After the loop has stopped. */
void tracking_free(tracking *tr);
const tracking_stats *tracking_get_stats(const tracking *tr);

#endif
