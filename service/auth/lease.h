/* lease: write-budget units this process has taken from Redis ahead of its writes, per address,
 * in a table of fixed size. No Redis here: limits.c takes the units and hands them back. */
#ifndef ENTITYD_LEASE_H
#define ENTITYD_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEASE_ADDRESS_SIZE 43 /* "0x" + 40 hex digits + NUL */

struct lease_waiter;

/* One address's lease. Its state follows from its fields: idle (no units, nothing asked),
 * held (units > 0), refilling (asked > 0: a charge is in flight, waiters queued on it). A lease
 * never moves in memory while it is in the table: a charge in flight points at it. */
typedef struct lease {
    char address[LEASE_ADDRESS_SIZE];
    bool used;
    uint32_t units;                   /* taken from Redis, not yet spent */
    uint32_t size;                    /* units a charge asks for beyond its waiters' (1..cap) */
    uint32_t asked;                   /* units the charge in flight asked for; 0: none in flight */
    uint32_t nwaiting;                /* requests queued on the charge in flight */
    uint64_t charged_ms;              /* when the last charge was sent */
    uint64_t granted_ms;              /* when units last came from Redis: they are held from then */
    uint64_t used_ms;                 /* when a write last asked for a unit */
    struct lease_waiter *head, *tail; /* oldest first; owned by limits.c */
    int32_t next; /* the next lease in its bucket, or in the free list; -1: none */
} lease;

/* Leases by address: at most `cap` at once; a full table takes no more (the caller charges
 * Redis per write instead), so many addresses cost a bounded amount of memory. */
typedef struct lease_table {
    lease *slots; /* cap leases; slots[0..high) have been used */
    size_t cap, high, count;
    uint32_t *buckets; /* 1 + the first lease's index, or 0 when empty */
    size_t nbuckets;   /* a power of two */
    int32_t free_head; /* removed leases, reused first; -1: none */
} lease_table;

/* Returns 0, or -1 when out of memory. Memory is touched only as leases are added. */
int lease_table_init(lease_table *t, size_t cap);
void lease_table_deinit(lease_table *t);
/* The address's lease, or NULL. */
lease *lease_find(lease_table *t, const char *address);
/* Adds an idle lease of size 1 for an address that has none; NULL when the table is full. */
lease *lease_add(lease_table *t, const char *address);
/* Removes a lease that is idle (no units, nothing asked, no waiters). */
void lease_remove(lease_table *t, lease *l);
/* Sets the size of the charge being sent at now_ms and returns it: an address whose last
 * charge was used up within a quarter of hold_ms asks for twice as many (at most cap); one
 * whose last charge is older than hold_ms asks for half as many (at least 1). So an address
 * that writes rarely takes one unit per write, and a busy one about what it spends in a
 * quarter of hold_ms. */
uint32_t lease_next_size(lease *l, uint64_t now_ms, uint64_t hold_ms, uint32_t cap);
/* The units a lease may hold for a budget of `per_minute`: a sixteenth of it, at least 1 and
 * at most LEASE_MAX_UNITS. */
#define LEASE_MAX_UNITS 1024
uint32_t lease_cap(int64_t per_minute);

#endif
