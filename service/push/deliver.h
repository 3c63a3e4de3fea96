/* deliver: the parts of webhook delivery (webhook.h) that its files share: the endpoints this
 * instance looks after (deliver.c) and one attempt (send.c). */
#ifndef ENTITYD_PUSH_DELIVER_H
#define ENTITYD_PUSH_DELIVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/ids.h"
#include "push/event.h"
#include "push/webhook.h"
#include "redis/keys.h"

struct app;
struct httpc;
struct watch_sub;
struct redisReply;

/* A delivery's id, the webhook-id: "<entity id>:<event id>". */
#define DELIVER_ID_MAX (IDS_SIZE + EVENT_ID_MAX + 8)

/* A delivery taken (pending in Redis, due again after the hold) whose attempt waits here: a
 * take claims a batch, so that the attempts of a fast receiver follow one another without a
 * round trip to Redis between them. Owned by its hook's queue until send_start. */
typedef struct taken {
    struct taken *next;
    char id[DELIVER_ID_MAX];
    long long attempts; /* made before */
    buf body;           /* the rendered webhook body */
    uint64_t at;        /* loop ms of the take */
} taken;

/* An endpoint as this instance sees it. Freed once dropped (its entry gone from the set) and
 * nothing of it is in flight (`calls` 0). */
typedef struct hook {
    webhooks *w;
    char eid[IDS_SIZE], wid[WEBHOOK_ID_SIZE];
    char entity[KEYS_ENTITY_SIZE], hooks[KEYS_ENTITY_SIZE], wh[KEYS_WEBHOOK_SIZE],
        events[KEYS_ENTITY_SIZE];
    bool held;              /* our lease, as of the last answer */
    bool taking;            /* a wh_take in flight */
    bool again;             /* take again once the one in flight is answered */
    bool off;               /* disabled, as of the last take */
    bool dropped;           /* no longer in the set: freed when calls reach 0 */
    int inflight;           /* attempts in flight */
    int calls;              /* callbacks of ours outstanding (scripts and attempts) */
    uint64_t held_until;    /* loop ms: our lease's end, with a margin */
    uint64_t paused_until;  /* loop ms */
    uint64_t missing_since; /* loop ms of the first MISSING answer in a row, 0: none */
    uint64_t pass;          /* the last pass that listed it */
    int64_t oldest_pending; /* Redis ms the oldest pending delivery was made, 0: none */
    struct watch_sub *sub;  /* wakes it when its entity's events grow; NULL once dropped */
    taken *queue, **qtail;  /* taken, in event order, not yet started */
    size_t queued;
    size_t asked;        /* deliveries the take in flight asked for */
    char *url, *secrets; /* as of the last take (NULL before one) */
    size_t url_len, secrets_len;
    double attempt_ms; /* moving average of an attempt's time: sizes the batch */
    struct hook *next;
} hook;

/* Counters by outcome and what the metrics show. */
typedef struct webhooks_stats {
    uint64_t succeeded, retried, failed, disabled_by_us, refused, tests;
} webhooks_stats;

struct webhooks {
    struct app *a;
    struct httpc *http;
    uv_timer_t timer;
    bool closed, scanning;
    bool kicked;          /* an endpoint made or changed here during a pass: another one at once */
    char token[IDS_SIZE]; /* this instance's lease token */
    char scan_from[256];  /* lex cursor of the pass under way */
    uint64_t pass;
    hook *hooks;
    int64_t schedule[CONFIG_SCHEDULE_MAX];
    int nschedule;
    webhooks_stats stats;
};

/* One item of a wh_take answer ({delivery id, attempts, XRANGE entry}) parsed and rendered;
 * NULL when it is malformed or memory is short (it is then due again after the hold, as if its
 * attempt had died). */
taken *send_prepare(hook *h, const struct redisReply *item);
/* Starts t's attempt to h's url, signed with h's secrets, and frees t. Takes a call of h
 * (h->calls, h->inflight) until the outcome is recorded. */
void send_start(hook *h, taken *t);
/* Frees t (not started). */
void send_forget(taken *t);
/* The deliveries queued on h are not to be sent by this instance now (a pause, a disable, the
 * lease lost): they are made due at once, in their order, for whoever takes next. */
void deliver_unclaim(hook *h);
/* An attempt of h ended (its outcome recorded or not): take the next ones. */
void deliver_attempt_done(hook *h);
/* Releases one call of h; frees a dropped hook with no call left. */
void deliver_release(hook *h);

#endif
