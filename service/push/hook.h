/* hook: what webhook delivery's files share (webhook.h): an endpoint as this instance sees it,
 * the deliveries it claimed and the instance's engine, and the calls an attempt (send.c) makes
 * on its endpoint, through the endpoint's kind (hook_ops: an entity's own, deliver.c, or a
 * platform endpoint's deliveries in one entity, deliver_platform.c). */
#ifndef ENTITYD_PUSH_HOOK_H
#define ENTITYD_PUSH_HOOK_H

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
struct phook;

/* A delivery's id, the webhook-id: "<entity id>:<event id>". */
#define HOOK_ID_MAX (IDS_SIZE + EVENT_ID_MAX + 8)

/* A delivery taken (pending in Redis, due again after the hold) whose attempt waits here: a
 * take claims a batch, so that the attempts of a fast receiver follow one another without a
 * round trip to Redis between them. Owned by its hook's queue until send_start. */
typedef struct taken {
    struct taken *next;
    char id[HOOK_ID_MAX];
    long long attempts; /* made before */
    buf body;           /* the rendered webhook body */
    uint64_t at;        /* loop ms of the take */
} taken;

/* An endpoint as this instance sees it, or (ph set) a platform endpoint's deliveries in one
 * entity, which deliver_platform.c owns. Freed once dropped (its entry gone from the set) and
 * nothing of it is in flight (`calls` 0). */
typedef struct hook {
    const struct hook_ops *ops; /* an entity's endpoint (deliver.c) or a platform's */
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
    struct hook *next; /* the webhooks' list, or a platform endpoint's bucket */
    struct phook *ph;  /* the platform endpoint; NULL: an entity's own */
    bool waiting;      /* in ph's queue of entities to take from */
    bool pending;      /* the last take left deliveries pending (due later) */
    struct hook *qnext;
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
    struct phook *phooks; /* the platform's endpoints (deliver_platform.c) */
    bool plat_reading;    /* their HGETALL in flight */
    uint64_t plat_pass;
    int64_t schedule[CONFIG_SCHEDULE_MAX];
    int nschedule;
    webhooks_stats stats;
};

/* What an endpoint's kind does when one of its attempts moves on. */
typedef struct hook_ops {
    void (*started)(hook *h);      /* an attempt starts (h->inflight counted already); NULL ok */
    void (*attempt_done)(hook *h); /* an attempt ended, its outcome recorded or not */
    void (*release)(hook *h);      /* one call of h ends: a dropped hook with none left goes */
    /* What an attempt came to ("ok", "fail", "gone"; a Retry-After pause); NULL ok. */
    void (*outcome)(hook *h, const char *kind, int64_t pause_ms);
    /* The deliveries queued on h are not to be sent by this instance now; NULL ok. */
    void (*unclaim)(hook *h);
} hook_ops;

void hook_attempt_start(hook *h);
void hook_attempt_done(hook *h);
void hook_release(hook *h);
void hook_outcome(hook *h, const char *kind, int64_t pause_ms);
void hook_unclaim(hook *h);

/* What a take named: the URL and secrets h's next attempts use. */
void hook_take_target(hook *h, const struct redisReply *url, const struct redisReply *secrets);
/* Frees the deliveries queued on h (not started). */
void hook_queue_free(hook *h);
/* Frees h and what it holds (its queue, URL and secrets). */
void hook_free(hook *h);
/* r is a status or string reply saying s. */
bool hook_reply_is(const struct redisReply *r, const char *s);
/* A wh_take answer's head is whole: {'OK', url, secrets, oldest pending, items...}. */
bool hook_take_ok(const struct redisReply *r);
/* Logs a script's error answer as what went wrong; a cluster's TRYAGAIN (a slot moving, tried
 * again at the next pass) and a missing answer (the store's own log says why) are not. */
void hook_log_error(const char *what, int status, const struct redisReply *r);
/* Frees t (not started). */
void taken_free(taken *t);

#endif
