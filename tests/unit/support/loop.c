/* loop: running a test's own libuv loop to an end (loop.h). */
#include "loop.h"

#include <stdint.h>
#include <unistd.h>

bool loop_drain(uv_loop_t *loop, int ms)
{
    uint64_t end = uv_hrtime() / 1000000 + (uint64_t)ms;
    while (uv_loop_alive(loop) && uv_hrtime() / 1000000 < end) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return !uv_loop_alive(loop);
}
