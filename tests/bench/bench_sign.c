/* entityd-bench-sign: throughput of secp256k1 signing (sig_sign, as attestations sign) on N
 * threads at once: the physical limit of cold attestations on that many pool threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <secp256k1.h>

#include "crypto/keccak.h"
#include "crypto/sig.h"

#define NDIGESTS    1024
#define MAX_THREADS 64

typedef struct worker {
    pthread_t thread;
    secp256k1_context *ctx;
    uint8_t key[32];
    double seconds;
    int nice;
    uint64_t count;
} worker;

static uint8_t digests[NDIGESTS][32];

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    worker *w = arg;
    if (w->nice)
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->nice);
    double end = now_seconds() + w->seconds;
    uint64_t n = 0;
    do {
        /* The clock every 32 signatures: far below 1% of their cost. */
        for (int k = 0; k < 32; k++) {
            eth_sig sig;
            if (sig_sign(w->ctx, w->key, digests[n % NDIGESTS], &sig) != 0) {
                fprintf(stderr, "entityd-bench-sign: signing failed\n");
                exit(1);
            }
            n++;
        }
    } while (now_seconds() < end);
    w->count = n;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: %s seconds [threads (1)] [nice (0)]\n", argv[0]);
        return 2;
    }
    double seconds = strtod(argv[1], NULL);
    int threads = argc > 2 ? atoi(argv[2]) : 1, nice = argc > 3 ? atoi(argv[3]) : 0;
    if (!(seconds > 0 && seconds <= 3600) || threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "%s: seconds in (0, 3600], threads 1 to %d\n", argv[0], MAX_THREADS);
        return 2;
    }
    for (int i = 0; i < NDIGESTS; i++) {
        char label[40];
        int n = snprintf(label, sizeof label, "entityd bench digest %d", i);
        keccak256(label, (size_t)n, digests[i]);
    }
    static worker ws[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        ws[i].ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
        keccak256("entityd bench signing key", 25, ws[i].key);
        ws[i].seconds = seconds;
        ws[i].nice = nice;
        if (!ws[i].ctx || pthread_create(&ws[i].thread, NULL, run, &ws[i]) != 0) {
            fprintf(stderr, "%s: cannot start thread %d\n", argv[0], i);
            return 1;
        }
    }
    double t0 = now_seconds();
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ws[i].thread, NULL);
        total += ws[i].count;
        secp256k1_context_destroy(ws[i].ctx);
    }
    double t = now_seconds() - t0;
    printf("sign_per_sec=%.0f threads=%d\n", (double)total / t, threads);
    return 0;
}
