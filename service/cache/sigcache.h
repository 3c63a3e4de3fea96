/* sigcache: a bounded memory of verified signatures, so a repeat caller skips recovery. */
#ifndef ENTITYD_SIGCACHE_H
#define ENTITYD_SIGCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sigcache sigcache;

/* A cache of about `entries` results (0 makes every lookup miss). NULL on allocation failure. */
sigcache *sigcache_new(size_t entries);
void sigcache_free(sigcache *c);
/* Looks up what the 65-byte signature recovers to over the message of `epoch`. */
bool sigcache_get(sigcache *c, const uint8_t sig[65], int64_t epoch, uint8_t addr[20]);
void sigcache_put(sigcache *c, const uint8_t sig[65], int64_t epoch, const uint8_t addr[20]);
/* Lookups answered from memory since start. */
uint64_t sigcache_hits(const sigcache *c);

#endif
