/* streams_int: the hub's parts shared by its files (streams.c: the hub, its limits, heartbeat
 * and re-check; stream_group.c: an entity's group, its reads and the fan-out). */
#ifndef ENTITYD_PUSH_STREAMS_INT_H
#define ENTITYD_PUSH_STREAMS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/hash.h"

#include "net/conn.h"
#include "push/streams.h"
#include "push/watch.h"
#include "redis/keys.h"

typedef struct group group;
typedef struct stream stream;

/* An event id as numbers, for the per-stream comparisons. */
typedef struct event_pos {
    uint64_t ms, seq;
} event_pos;

/* A credential the re-check replays, shared by the streams opened with the same bytes (the
 * same caller, credential and entity): one check for all of them. */
typedef struct cred {
    struct cred *hnext;
    group *g; /* the entity its streams read */
    uint64_t hash;
    int refs; /* streams + a check in flight */
    bool checking;
    size_t len;
    char bytes[];
} cred;

/* Open streams per caller (STREAMS_PER_CALLER). */
typedef struct caller_count {
    struct caller_count *hnext;
    int n;
    char caller[43];
} caller_count;

/* One open stream. Its state: catching up (its own read of the log in flight, the live feed
 * not yet its) or live (the group's events after `pos` are its); `c` NULL once it ended, its
 * memory kept until its read in flight is answered. */
struct stream {
    streams *h;
    group *g;
    cred *cr;
    caller_count *cc;
    struct conn *c;
    stream *prev, *next; /* the group's list */
    event_pos pos;       /* the last event it was sent (or starts after) */
    bool live, reading;
};

/* An entity's open streams and its place in the log. */
struct group {
    streams *h;
    group *hnext;
    watch_sub *sub;
    stream *head;
    size_t n;
    event_pos pos; /* the last event the group read; valid once known */
    bool known;    /* pos is set (by the first stream to go live) */
    bool reading, again;
    int busy; /* reads in flight and fan-outs on the stack: the group stays */
    char key[KEYS_ENTITY_SIZE];
    size_t key_len;
    char id[48];
};

struct streams {
    struct app *a;
    watch *w;
    group **groups;
    size_t ngroups_b, ngroups;
    cred **creds;
    size_t ncreds_b, ncreds;
    caller_count **callers;
    size_t ncallers_b;
    size_t open;
    bool closed;
    streams_check check;
    void *check_ctx;
    out_chunk *heartbeat;
    struct sendpool *sends; /* shares the fan-outs' sends (STREAM_SEND_THREADS) */
    uv_timer_t beat, recheck;
    uint64_t opened, ended_behind, ended_check, events_sent;
    void (*end)(stream *s, bool finish); /* streams_end, for the groups */
};

/* streams.c: ends a stream from above (the connection closes after what is queued), or after
 * its connection ended it (c already NULL): unlinks and frees it once no read is in flight.
 * The groups reach it through the hub's `end`. */
void streams_end(stream *s, bool finish);

/* stream_group.c */
group *group_get(streams *h, const char *entity_id);
void group_release(group *g);
/* The stream's first read (start) handled: sends what it already holds and goes live or
 * reads on. */
void group_start_stream(stream *s, const streams_start *start);
void group_unlink(stream *s);
/* The fan-out: fanout_queue queues ch on a live stream (which may end, and be freed, here);
 * fanout_flush writes every queue so filled at once. */
void fanout_queue(stream *s, out_chunk *ch);
void fanout_flush(streams *h);
/* Parses "<ms>-<seq>". */
bool event_pos_parse(const char *s, size_t len, event_pos *out);
int event_pos_cmp(event_pos a, event_pos b);

#endif
