/* workers: a supervisor that forks WORKERS processes, restarts one that dies (with backoff),
 * passes SIGTERM and SIGINT on (each as itself), and exits once every worker has drained. */
#ifndef ENTITYD_WORKERS_H
#define ENTITYD_WORKERS_H

#include <stdint.h>

#define WORKERS_MAX 256

typedef struct workers_options {
    int count;                    /* processes to keep running, 2 to WORKERS_MAX */
    uint64_t shutdown_timeout_ms; /* a worker's own drain limit; the supervisor waits longer */
    void (*on_exit)(int index);   /* in the supervisor, after a worker is reaped (may be NULL) */
} workers_options;

enum workers_role { WORKERS_CHILD, WORKERS_DONE };

/* Forks the workers and supervises them. Returns WORKERS_CHILD in each worker, with its index
 * (0 … count-1) in *out and the signal mask as it was; returns WORKERS_DONE in the supervisor
 * once every worker has exited after SIGTERM or SIGINT, with the exit status in *out (0 when
 * every worker exited 0). A worker whose supervisor dies gets SIGTERM. */
int workers_supervise(const workers_options *o, int *out);

/* WORKERS as a count: "auto" is one per CPU this process may run on; otherwise 1 … WORKERS_MAX.
 * Returns -1 for anything else. */
int workers_parse(const char *s);

#endif
