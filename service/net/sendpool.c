/* sendpool: the loop's sendmsg calls shared with helper threads (sendpool.h). Each helper
 * waits on its own semaphore for a range of the current run, makes those calls and posts the
 * pool's `done`; the semaphores order the loop's writes of the jobs before the helpers' reads
 * and the helpers' results before the loop's. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <uv.h>

#include "net/sendpool.h"

#define SENDPOOL_MAX_THREADS 16

typedef struct helper {
    sendpool *p;
    uv_thread_t tid;
    uv_sem_t go;
    sendpool_job *jobs;
    size_t n;
} helper;

typedef enum { POOL_IDLE, POOL_RUNNING, POOL_FAILED } pool_state;

struct sendpool {
    int want;    /* helpers asked for */
    int started; /* helpers running */
    pool_state state;
    bool stop;
    uint64_t shared; /* runs the helpers took part in */
    uv_sem_t done;
    helper h[SENDPOOL_MAX_THREADS];
};

static void send_range(sendpool_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sendpool_job *j = &jobs[i];
        do
            j->res = sendmsg(j->fd, &j->m, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (j->res < 0 && errno == EINTR);
        j->err = j->res < 0 ? errno : 0;
    }
}

static void helper_main(void *arg)
{
    helper *h = arg;
    for (;;) {
        uv_sem_wait(&h->go);
        if (h->p->stop)
            return;
        send_range(h->jobs, h->n);
        uv_sem_post(&h->p->done);
    }
}

sendpool *sendpool_new(int threads)
{
    sendpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (threads < 0) {
        unsigned cores = uv_available_parallelism();
        threads = cores > 1 ? (int)cores - 1 : 0;
        if (threads > 3)
            threads = 3;
    }
    p->want = threads > SENDPOOL_MAX_THREADS ? SENDPOOL_MAX_THREADS : threads;
    return p;
}

/* Starts the helpers; on any failure the pool stays with those that started (FAILED: none,
 * and the loop sends alone from then on). */
static void pool_start(sendpool *p)
{
    p->state = POOL_FAILED;
    if (uv_sem_init(&p->done, 0) != 0)
        return;
    p->state = POOL_RUNNING;
    for (int i = 0; i < p->want; i++) {
        helper *h = &p->h[i];
        h->p = p;
        if (uv_sem_init(&h->go, 0) != 0)
            break;
        if (uv_thread_create(&h->tid, helper_main, h) != 0) {
            uv_sem_destroy(&h->go);
            break;
        }
        p->started++;
    }
}

void sendpool_run(sendpool *p, sendpool_job *jobs, size_t n)
{
    if (p && p->state == POOL_IDLE && p->want > 0 && n >= SENDPOOL_MIN_SHARED)
        pool_start(p);
    int helpers = p && p->state == POOL_RUNNING && n >= SENDPOOL_MIN_SHARED ? p->started : 0;
    if (helpers == 0) {
        send_range(jobs, n);
        return;
    }
    p->shared++;
    /* Equal shares; the loop thread takes the last. */
    size_t share = n / (size_t)(helpers + 1), at = 0;
    for (int i = 0; i < helpers; i++) {
        p->h[i].jobs = jobs + at;
        p->h[i].n = share;
        at += share;
        uv_sem_post(&p->h[i].go);
    }
    send_range(jobs + at, n - at);
    for (int i = 0; i < helpers; i++)
        uv_sem_wait(&p->done);
}

int sendpool_threads(const sendpool *p)
{
    return p ? p->started : 0;
}

uint64_t sendpool_shared_runs(const sendpool *p)
{
    return p ? p->shared : 0;
}

void sendpool_free(sendpool *p)
{
    if (!p)
        return;
    if (p->state == POOL_RUNNING) {
        p->stop = true;
        for (int i = 0; i < p->started; i++)
            uv_sem_post(&p->h[i].go);
        for (int i = 0; i < p->started; i++) {
            uv_thread_join(&p->h[i].tid);
            uv_sem_destroy(&p->h[i].go);
        }
        uv_sem_destroy(&p->done);
    }
    free(p);
}
