/* send: how a unit of commands is sent, and when REDIS_MAX_PENDING refuses it; shared by the
 * single connection (single.c) and the cluster's connections (cluster.c). Internal to redis/. */
#ifndef ENTITYD_SEND_H
#define ENTITYD_SEND_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/command.h"

#define SEND_TRACK   1  /* CLIENT CACHING yes in front: the read cache keeps the answer */
#define SEND_ANY_CAP 2  /* never shed: bound to a command already sent (see store_read) */
#define SEND_RESERVE 4  /* room is kept for the read that follows (STORE_READ_RESERVE) */
#define SEND_CONTROL 8  /* the service's upkeep (store_control): may use the room kept for it */
#define SEND_WRITES  16 /* a write script: its keys leave the read cache when its answer comes */

/* Commands of REDIS_MAX_PENDING that requests leave to the upkeep: a heartbeat and a tracking
 * request fit when requests have filled the rest. */
#define SEND_CONTROL_ROOM 2

/* True when a unit of n commands must be refused: `cap` (REDIS_MAX_PENDING) would be passed
 * with `pending` commands unanswered. A unit larger than the cap on its own still goes when
 * nothing is pending, or it could never run. A unit bound to one already admitted
 * (SEND_ANY_CAP) goes: room was kept for it. */
static inline bool send_refused(size_t pending, size_t cap, int flags, size_t n)
{
    if (flags & SEND_ANY_CAP)
        return false;
    size_t limit =
        (flags & SEND_CONTROL) || cap <= SEND_CONTROL_ROOM ? cap : cap - SEND_CONTROL_ROOM;
    if (flags & SEND_RESERVE)
        n += STORE_RESERVED_CMDS;
    return pending != 0 && pending + n > limit;
}

#endif
