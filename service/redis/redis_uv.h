/* redis_uv: hiredis's async context on the libuv loop, with writes batched per loop iteration. */
#ifndef ENTITYD_REDIS_UV_H
#define ENTITYD_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches ac to the loop. Returns REDIS_OK or REDIS_ERR. The adapter's memory belongs to ac:
 * hiredis releases it through the cleanup hook when the context goes. */
int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif
