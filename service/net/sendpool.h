/* sendpool: many sockets' sendmsg calls shared between the loop thread and a few helper
 * threads, the loop waiting until all are made. An event for 10,000 streams is 10,000 small
 * loopback or LAN sends, and nearly all their cost is the kernel's (the send and the receiving
 * socket's path run in the sender's context): one core makes about 90,000 a second. The
 * helpers only make the system calls the loop thread prepared; everything a result changes is
 * changed by the loop after the wait, so no connection's state is ever touched off the loop,
 * and no socket can close (and its number be reused) while a helper holds it. */
#ifndef ENTITYD_SENDPOOL_H
#define ENTITYD_SENDPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef struct sendpool sendpool;

/* One send: the loop fills fd and m; the pool sets res (bytes taken, or -1) and err. */
typedef struct sendpool_job {
    int fd;
    struct msghdr m;
    ssize_t res;
    int err;
} sendpool_job;

/* Fewer jobs than this are sent by the loop thread alone: waking helpers costs more. */
#define SENDPOOL_MIN_SHARED 256

/* A pool of `threads` helpers (0: the loop sends alone; negative: one fewer than the cores,
 * at most 3). The threads start at the first shared run, so a pool made before a fork starts
 * none in the parent. NULL when out of memory. */
sendpool *sendpool_new(int threads);
/* Makes every job's sendmsg (MSG_DONTWAIT | MSG_NOSIGNAL, EINTR retried) and returns when all
 * are made. Loop thread. */
void sendpool_run(sendpool *p, sendpool_job *jobs, size_t n);
/* Helpers that share runs (0 until the first shared run starts them). */
int sendpool_threads(const sendpool *p);
/* Runs the helpers took part in. */
uint64_t sendpool_shared_runs(const sendpool *p);
/* Stops and joins the helpers; NULL is fine. */
void sendpool_free(sendpool *p);

#endif
