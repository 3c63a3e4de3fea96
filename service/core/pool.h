/* pool: what every libuv threadpool job shares (signature recovery, attestation signing). */
#ifndef ENTITYD_POOL_H
#define ENTITYD_POOL_H

/* For a threadpool work callback: lowers the calling pool thread's priority below the loop's
 * (once per thread), so a burst of pool work never starves the loop. */
void pool_lower_priority(void);

#endif
