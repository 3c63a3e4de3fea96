/* redis_uv: hiredis's async context on the libuv loop, with writes batched per loop iteration. */
#ifndef ENTITYD_REDIS_UV_H
#define ENTITYD_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches ac to the loop. Returns REDIS_OK or REDIS_ERR. The adapter's memory belongs to ac:
 * hiredis releases it through the cleanup hook when the context goes. */
int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

/* Starts a connection to a numeric address (resolve.h: a host name would block the loop inside
 * hiredis) on the loop, the way every connection of the service starts: ac->data is data, the
 * replies are built by fn (NULL: hiredis's own) and the callbacks are set before any can run.
 * Returns the context, or NULL when none could be made (the caller retries later). */
redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *numeric, int port, void *data,
                                    redisReplyObjectFunctions *fn, redisConnectCallback *on_connect,
                                    redisDisconnectCallback *on_disconnect);

#endif
