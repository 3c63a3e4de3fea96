/* pool: what every libuv threadpool job shares (pool.h). */
#include "core/pool.h"

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define POOL_NICE 10

/* Pool threads run at a lower priority than the loop: with more pool threads than cores, a
 * burst of signature checks would otherwise starve the loop, and every unsigned request and
 * probe with it. Each pool thread lowers itself once (Linux: per-thread nice). */
void pool_lower_priority(void)
{
    static _Thread_local bool lowered;
    if (lowered)
        return;
    lowered = true;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), POOL_NICE);
}
