/* deliver_platform: delivery of every entity's events to the platform's endpoints (POST
 * /api/webhooks; webhook.h). A platform endpoint lives in webhooks:{platform}, its deliveries in
 * each entity's slot (keys.h): no script can read both, so each pass reads the endpoints here
 * and hands a take their URL, events and secrets. One instance holds an endpoint's lease
 * (whp:{<wid>}, whp_lease.lua) and takes from its entities one at a time, in a queue fed by the
 * entities' watch (their events grew), the deliveries left pending, the retries asked elsewhere
 * (whp:{<wid>}:wake), the entities made since the endpoint, and a slow sweep over the directory
 * of all entities, so a restart or a missed wake still delivers everything. */
#include "push/deliver_platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/isotime.h"
#include "core/log.h"
#include "push/send.h"
#include "push/watch.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

#define PLAT_BUCKETS 512
/* Directory entries read per pass, by the sweep and by the look at the newest entities. */
#define PLAT_PAGE   "64"
#define PLAT_PAGE_N 64
/* The sweep reads on only while fewer entities than this wait to be taken from. */
#define PLAT_QUEUE_MAX 256
/* The directory's entry is written before its entity: an entity not there yet is asked again
 * at each pass for this long before it is let go. */
#define PLAT_GONE_GRACE_MS 60000
/* How far before the endpoint's creation the look at the newest entities starts: instances'
 * clocks differ (an entity made just before is found by the sweep anyway). */
#define PLAT_SKEW_MS 60000
/* The directory's entries: "<createdAt ms, 16 digits>:<entity id>". */
#define PLAT_ENTRY_SIZE (16 + 1 + IDS_SIZE + 2)

typedef struct phook {
    webhooks *w;
    char wid[WEBHOOK_ID_SIZE];
    char lease_key[KEYS_WEBHOOK_SIZE], recent_key[KEYS_WEBHOOK_SIZE], wake_key[KEYS_WEBHOOK_SIZE];
    char *json, *secrets; /* the endpoint as the last pass read it */
    bool enabled;
    bool held, dropped, taking, sweeping;
    bool failing; /* may have a failing time in Redis (unknown at the start) */
    uint64_t held_until, paused_until, pass;
    int inflight; /* attempts in flight, all entities */
    int calls;    /* callbacks of its own outstanding (not its entities') */
    char sweep_from[PLAT_ENTRY_SIZE], newest[PLAT_ENTRY_SIZE]; /* lex cursors */
    hook *buckets[PLAT_BUCKETS];
    hook *qhead, *qtail;
    size_t qlen;
    struct phook *next;
} phook;

static void pump(phook *ph);

static unsigned bucket_of(const char *eid)
{
    unsigned x = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)eid; *p; p++)
        x = (x ^ *p) * 16777619u;
    return x % PLAT_BUCKETS;
}

/* ---- an endpoint's entities ---- */

static void ent_unlink_free(hook *h)
{
    for (hook **p = &h->ph->buckets[bucket_of(h->eid)]; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    hook_free(h);
}

static void on_wake(void *data, const char *entity_id);

static hook *ent_find(phook *ph, const char *eid)
{
    for (hook *h = ph->buckets[bucket_of(eid)]; h; h = h->next)
        if (!strcmp(h->eid, eid))
            return h;
    return NULL;
}

static void deliver_platform_started(hook *h);
static void deliver_platform_attempt_done(hook *h);
static void deliver_platform_release(hook *h);
static void deliver_platform_outcome(hook *h, const char *kind, int64_t pause_ms);

/* An entity's deliveries of a platform endpoint: attempts counted against the endpoint's
 * in-flight limit, outcomes judged for the endpoint across its entities. */
static const hook_ops platform_ops = {
    .started = deliver_platform_started,
    .attempt_done = deliver_platform_attempt_done,
    .release = deliver_platform_release,
    .outcome = deliver_platform_outcome,
};

static hook *ent_get(phook *ph, const char *eid)
{
    hook *h = ent_find(ph, eid);
    if (h || !(h = calloc(1, sizeof *h)))
        return h;
    h->w = ph->w;
    h->ops = &platform_ops;
    h->ph = ph;
    h->qtail = &h->queue; /* unused: a platform endpoint starts what it takes at once */
    snprintf(h->eid, sizeof h->eid, "%s", eid);
    snprintf(h->wid, sizeof h->wid, "%s", ph->wid);
    keys_webhooks(h->hooks, eid);
    keys_webhook(h->wh, eid, ph->wid, "");
    entity_keys k;
    keys_entity(&k, eid);
    memcpy(h->entity, k.entity, k.entity_len + 1);
    memcpy(h->events, k.events, k.events_len + 1);
    unsigned b = bucket_of(eid);
    h->next = ph->buckets[b];
    ph->buckets[b] = h;
    h->held = true; /* the endpoint's lease stands for its entities' */
    if (ph->w->a->watch)
        h->sub = watch_subscribe(ph->w->a->watch, h->eid, on_wake, h);
    return h;
}

/* The entity is deleted: its deliveries went with it (keys.h). */
static void ent_drop(hook *h)
{
    h->dropped = true;
    watch_unsubscribe(h->sub);
    h->sub = NULL;
    if (h->calls == 0 && !h->waiting)
        ent_unlink_free(h);
}

static void enqueue(hook *h)
{
    phook *ph = h->ph;
    if (h->waiting || h->dropped)
        return;
    h->waiting = true;
    h->qnext = NULL;
    if (ph->qtail)
        ph->qtail->qnext = h;
    else
        ph->qhead = h;
    ph->qtail = h;
    ph->qlen++;
}

static hook *dequeue(phook *ph)
{
    hook *h = ph->qhead;
    if (!h)
        return NULL;
    ph->qhead = h->qnext;
    if (!ph->qhead)
        ph->qtail = NULL;
    ph->qlen--;
    h->waiting = false;
    return h;
}

static void enqueue_id(phook *ph, const char *s, size_t len)
{
    char eid[IDS_SIZE];
    if (len != IDS_SIZE - 1 || !ids_valid(s, len, 'c'))
        return;
    memcpy(eid, s, len);
    eid[len] = '\0';
    hook *h = ent_get(ph, eid);
    if (h)
        enqueue(h);
}

static void on_wake(void *data, const char *entity_id)
{
    (void)entity_id;
    hook *h = data;
    enqueue(h);
    pump(h->ph);
}

/* ---- the endpoint's lifetime ---- */

static void ph_try_free(phook *ph)
{
    if (!ph->dropped || ph->calls)
        return;
    for (size_t b = 0; b < PLAT_BUCKETS; b++)
        for (hook *h = ph->buckets[b]; h; h = h->next)
            if (h->calls)
                return;
    for (size_t b = 0; b < PLAT_BUCKETS; b++)
        for (hook *h = ph->buckets[b], *next; h; h = next) {
            next = h->next;
            hook_free(h);
        }
    for (phook **p = &ph->w->phooks; *p; p = &(*p)->next)
        if (*p == ph) {
            *p = ph->next;
            break;
        }
    free(ph->json);
    free(ph->secrets);
    free(ph);
}

/* Deleted: its deliveries stop here (those in flight end, their outcomes recorded). */
static void ph_drop(phook *ph)
{
    ph->dropped = true;
    ph->held = false;
    for (size_t b = 0; b < PLAT_BUCKETS; b++)
        for (hook *h = ph->buckets[b]; h; h = h->next) {
            h->dropped = true;
            watch_unsubscribe(h->sub);
            h->sub = NULL;
        }
    ph_try_free(ph);
}

/* One call of ph's own answered: false when ph is no longer to be used. */
static bool ph_back(phook *ph)
{
    ph->calls--;
    if (ph->w->closed)
        return false;
    if (ph->dropped) {
        ph_try_free(ph);
        return false;
    }
    return true;
}

static void on_ph_ignored(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    ph_back(data);
}

static void deliver_platform_release(hook *h)
{
    phook *ph = h->ph;
    h->calls--;
    if (h->dropped && h->calls == 0 && !h->waiting && !ph->dropped)
        ent_unlink_free(h);
    else if (ph->dropped)
        ph_try_free(ph);
}

static void deliver_platform_started(hook *h)
{
    h->ph->inflight++;
}

static void deliver_platform_attempt_done(hook *h)
{
    phook *ph = h->ph;
    h->inflight--;
    ph->inflight--;
    if (!ph->w->closed && !ph->dropped)
        pump(ph);
}

/* ---- taking deliveries, one entity at a time ---- */

/* Lists the deliveries a take made (ids of first attempts) for GET …/deliveries. */
static void list_recent(phook *ph, const redisReply *r, size_t from)
{
    const char *argv[1 + 64];
    size_t lens[1 + 64], n = 1;
    char logmax[BUF_INT_SIZE];
    buf_format_int(logmax, (long long)ph->w->a->cfg.webhook_log_max);
    argv[0] = logmax;
    lens[0] = strlen(logmax);
    for (size_t i = from; i < r->elements && n < 1 + 64; i++) {
        const redisReply *it = r->element[i];
        if (it->type != REDIS_REPLY_ARRAY || it->elements != 3 ||
            it->element[0]->type != REDIS_REPLY_STRING ||
            it->element[1]->type != REDIS_REPLY_INTEGER || it->element[1]->integer != 0)
            continue;
        argv[n] = it->element[0]->str;
        lens[n++] = it->element[0]->len;
    }
    if (n == 1)
        return;
    const char *keys[1 + 1 + 64];
    size_t klens[1 + 1 + 64];
    keys[0] = ph->recent_key;
    klens[0] = strlen(ph->recent_key);
    memcpy(keys + 1, argv, n * sizeof *argv);
    memcpy(klens + 1, lens, n * sizeof *lens);
    ph->calls++;
    store_script(ph->w->a->store, LUA_WHP_RECENT, on_ph_ignored, ph, 1, (int)(n + 1), keys, klens);
}

static void on_take(void *data, int status, redisReply *r)
{
    hook *h = data;
    phook *ph = h->ph;
    webhooks *w = ph->w;
    bool live = !w->closed && !ph->dropped;
    const redisReply *head =
        r && r->type == REDIS_REPLY_ARRAY && r->elements ? r->element[0] : NULL;
    if (!live || h->dropped) {
        ph->taking = false;
        deliver_platform_release(h);
        if (live)
            pump(ph);
        return;
    }
    if (status != STORE_OK || !head) {
        hook_log_error("platform webhook take failed", status, r);
        h->pending = true; /* asked again at the next pass */
    } else if (hook_reply_is(head, "OK") && hook_take_ok(r)) {
        h->missing_since = 0;
        h->pending = strcmp(r->element[3]->str, "0") != 0;
        size_t items = r->elements - 4;
        list_recent(ph, r, 4);
        hook_take_target(h, r->element[1], r->element[2]);
        for (size_t i = 4; i < r->elements; i++) {
            taken *t = send_prepare(h, r->element[i]);
            if (t)
                send_start(h, t);
        }
        /* a take may have left more behind: after the others waiting */
        if (items > 0)
            enqueue(h);
    } else if (hook_reply_is(head, "OFF")) {
        ph->enabled = false; /* until the next pass reads it enabled again */
    } else if (hook_reply_is(head, "PAUSED")) {
        h->pending = true;
    } else if (hook_reply_is(head, "GONE")) {
        uint64_t now = uv_now(w->a->loop);
        if (!h->missing_since)
            h->missing_since = now;
        if (now - h->missing_since < PLAT_GONE_GRACE_MS)
            h->pending = true; /* its directory entry came before it: ask again */
        else
            ent_drop(h);
    }
    ph->taking = false;
    deliver_platform_release(h);
    pump(ph);
}

static void take(hook *h, int64_t room)
{
    phook *ph = h->ph;
    webhooks *w = ph->w;
    const config *c = &w->a->cfg;
    char n[BUF_INT_SIZE], hold[BUF_INT_SIZE], logmax[BUF_INT_SIZE], limits[2 * BUF_INT_SIZE + 2];
    buf_format_int(n, (long long)room);
    buf_format_int(hold, (long long)(c->webhook_timeout_ms + c->webhook_lease_ms));
    buf_format_int(logmax, (long long)c->webhook_log_max);
    snprintf(limits, sizeof limits, "%lld:%lld", (long long)c->events_max,
             (long long)c->events_max_bytes);
    const char *argv[] = {h->entity, h->hooks, h->wh,  h->events, h->wid, w->token, h->eid,
                          n,         hold,     logmax, limits,    "256",  ph->json, ph->secrets};
    size_t lens[14];
    for (size_t i = 0; i < 14; i++)
        lens[i] = strlen(argv[i]);
    ph->taking = true;
    h->calls++;
    store_script(w->a->store, LUA_WH_TAKE, on_take, h, 4, 14, argv, lens);
}

/* The next entity's take, while the lease is ours, the endpoint enabled and not paused, and
 * fewer than WEBHOOK_INFLIGHT of its attempts are in flight: one take at a time, so the limit
 * holds across entities. */
static void pump(phook *ph)
{
    webhooks *w = ph->w;
    uint64_t now = uv_now(w->a->loop);
    if (w->closed || ph->dropped || ph->taking || !ph->held || !ph->enabled || !ph->json ||
        !ph->secrets || now >= ph->held_until || now < ph->paused_until)
        return;
    int64_t room = w->a->cfg.webhook_inflight - ph->inflight;
    if (room <= 0)
        return;
    hook *h;
    while ((h = dequeue(ph)) && h->dropped)
        if (h->calls == 0)
            ent_unlink_free(h);
    if (h)
        take(h, room);
}

/* ---- finding entities with work ---- */

/* Enqueues each directory entry of a ZRANGE BYLEX answer; returns how many it held and leaves
 * the last in cursor. */
static size_t enqueue_entries(phook *ph, const redisReply *r, char cursor[PLAT_ENTRY_SIZE])
{
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING || e->len >= PLAT_ENTRY_SIZE || e->len < 18)
            continue;
        memcpy(cursor, e->str, e->len + 1);
        enqueue_id(ph, e->str + 17, e->len - 17);
    }
    return r->elements;
}

static void on_sweep(void *data, int status, redisReply *r)
{
    phook *ph = data;
    ph->sweeping = false;
    if (!ph_back(ph))
        return;
    if (status == STORE_OK && enqueue_entries(ph, r, ph->sweep_from) < PLAT_PAGE_N)
        ph->sweep_from[0] = '\0'; /* at the end: the next pass starts again */
    pump(ph);
}

static void on_newest(void *data, int status, redisReply *r)
{
    phook *ph = data;
    if (!ph_back(ph))
        return;
    if (status == STORE_OK)
        enqueue_entries(ph, r, ph->newest);
    pump(ph);
}

static void on_wake_pop(void *data, int status, redisReply *r)
{
    phook *ph = data;
    if (!ph_back(ph))
        return;
    /* ZPOPMIN: member, score, member, score… */
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING)
                enqueue_id(ph, r->element[i]->str, r->element[i]->len);
    pump(ph);
}

static void range(phook *ph, const char *after, store_cb cb)
{
    char from[PLAT_ENTRY_SIZE + 1];
    int flen =
        after[0] ? snprintf(from, sizeof from, "(%s", after) : snprintf(from, sizeof from, "-");
    const char *argv[] = {"ZRANGE", KEYS_DIR_CREATED, from, "+", "BYLEX", "LIMIT", "0", PLAT_PAGE};
    size_t lens[8];
    for (size_t i = 0; i < 8; i++)
        lens[i] = strlen(argv[i]);
    lens[2] = (size_t)flen;
    ph->calls++;
    store_command(ph->w->a->store, cb, ph, 8, argv, lens);
}

/* A pass of an endpoint we hold: what may have work is queued, then taken from. */
static void look(phook *ph)
{
    webhooks *w = ph->w;
    const char *pop[] = {"ZPOPMIN", ph->wake_key, PLAT_PAGE};
    size_t plens[] = {7, strlen(ph->wake_key), strlen(PLAT_PAGE)};
    ph->calls++;
    store_command(w->a->store, on_wake_pop, ph, 3, pop, plens);
    for (size_t b = 0; b < PLAT_BUCKETS; b++)
        for (hook *h = ph->buckets[b]; h; h = h->next)
            if (h->pending)
                enqueue(h);
    range(ph, ph->newest, on_newest);
    if (!ph->sweeping && ph->qlen < PLAT_QUEUE_MAX) {
        ph->sweeping = true;
        range(ph, ph->sweep_from, on_sweep);
    }
    pump(ph);
}

/* ---- leases ---- */

typedef struct lease_call {
    phook *ph;
    uint64_t sent;
} lease_call;

static void on_lease(void *data, int status, redisReply *r)
{
    lease_call *lc = data;
    phook *ph = lc->ph;
    uint64_t sent = lc->sent;
    free(lc);
    if (!ph_back(ph))
        return;
    if (status == STORE_OK && hook_reply_is(r, "HELD")) {
        ph->held = true;
        /* counted from the send: the lease began no earlier in Redis's time */
        ph->held_until = sent + (uint64_t)ph->w->a->cfg.webhook_lease_ms * 9 / 10;
        look(ph);
    } else if (status == STORE_OK && hook_reply_is(r, "BUSY")) {
        ph->held = false;
    } else {
        hook_log_error("platform webhook lease failed", status, r);
    }
}

static void lease(phook *ph)
{
    webhooks *w = ph->w;
    lease_call *lc = malloc(sizeof *lc);
    if (!lc)
        return;
    lc->ph = ph;
    lc->sent = uv_now(w->a->loop);
    char ms[BUF_INT_SIZE];
    buf_format_int(ms, (long long)w->a->cfg.webhook_lease_ms);
    const char *argv[] = {ph->lease_key, w->token, ms};
    size_t lens[] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    ph->calls++;
    store_script(w->a->store, LUA_WHP_LEASE, on_lease, lc, 1, 3, argv, lens);
}

/* ---- the endpoints, read at each pass ---- */

static phook *ph_get(webhooks *w, const char *wid, size_t len)
{
    for (phook *ph = w->phooks; ph; ph = ph->next)
        if (!ph->dropped && strlen(ph->wid) == len && !memcmp(ph->wid, wid, len))
            return ph;
    phook *ph = calloc(1, sizeof *ph);
    if (!ph)
        return NULL;
    ph->w = w;
    memcpy(ph->wid, wid, len);
    ph->wid[len] = '\0';
    keys_webhook_platform(ph->lease_key, ph->wid, "");
    keys_webhook_platform(ph->recent_key, ph->wid, ":recent");
    keys_webhook_platform(ph->wake_key, ph->wid, ":wake");
    ph->failing = true;
    ph->next = w->phooks;
    w->phooks = ph;
    return ph;
}

static void set_text(char **dst, const char *s, size_t len)
{
    char *t = strndup(s, len);
    if (!t)
        return;
    free(*dst);
    *dst = t;
}

/* The look at the newest entities starts a little before the endpoint's creation. */
static void newest_start(phook *ph)
{
    const char *at = strstr(ph->json, "\"createdAt\":\"");
    const char *end = at ? strchr(at + 13, '"') : NULL;
    int64_t ms = 0;
    if (!end || isotime_parse(at + 13, (size_t)(end - at - 13), &ms) != 0)
        ms = 0;
    if (ms > PLAT_SKEW_MS)
        ms -= PLAT_SKEW_MS;
    snprintf(ph->newest, sizeof ph->newest, "%016lld", (long long)(ms > 0 ? ms : 0));
}

static void on_config(void *data, int status, redisReply *r)
{
    webhooks *w = data;
    w->plat_reading = false;
    if (w->closed)
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY) {
        if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR)
            log_event(LOG_WARN, "platform webhooks not read", r->str);
        return; /* the last read stands until the next pass */
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            !webhook_id_valid(f->str, f->len))
            continue;
        phook *ph = ph_get(w, f->str, f->len);
        if (!ph)
            continue;
        bool first = !ph->json;
        set_text(&ph->json, v->str, v->len);
        /* webhook_json renders the field so; a string value cannot hold it unescaped */
        ph->enabled = ph->json && strstr(ph->json, ",\"enabled\":true,") != NULL;
        if (first && ph->json)
            newest_start(ph);
        ph->pass = w->plat_pass;
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || f->len < 5 ||
            memcmp(f->str, "sec:", 4) != 0)
            continue;
        for (phook *ph = w->phooks; ph; ph = ph->next)
            if (!ph->dropped && !strcmp(ph->wid, f->str + 4) && ph->pass == w->plat_pass)
                set_text(&ph->secrets, v->str, v->len);
    }
    for (phook *ph = w->phooks, *next; ph; ph = next) {
        next = ph->next;
        if (ph->dropped)
            continue;
        if (ph->pass != w->plat_pass)
            ph_drop(ph);
        else
            lease(ph);
    }
}

void deliver_platform_pass(webhooks *w)
{
    if (w->plat_reading)
        return;
    w->plat_reading = true;
    w->plat_pass++;
    const char *argv[] = {"HGETALL", KEYS_WEBHOOKS_PLATFORM};
    size_t lens[] = {7, strlen(KEYS_WEBHOOKS_PLATFORM)};
    store_command(w->a->store, on_config, w, 2, argv, lens);
}

/* ---- outcomes across entities ---- */

static void on_disabled(void *data, int status, redisReply *r)
{
    phook *ph = data;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        ph->w->stats.disabled_by_us++;
    ph_back(ph);
}

static void disable(phook *ph, const char *reason)
{
    ph->enabled = false; /* nothing more is taken here; the next pass reads the record */
    const char *argv[] = {KEYS_WEBHOOKS_PLATFORM, ph->wid, reason};
    size_t lens[] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    ph->calls++;
    store_script(ph->w->a->store, LUA_WHP_DISABLE, on_disabled, ph, 1, 3, argv, lens);
}

static void on_outcome(void *data, int status, redisReply *r)
{
    phook *ph = data;
    if (!ph_back(ph))
        return;
    if (status == STORE_OK && hook_reply_is(r, "DISABLE"))
        disable(ph, "failing");
}

static void deliver_platform_outcome(hook *h, const char *kind, int64_t pause_ms)
{
    phook *ph = h->ph;
    webhooks *w = ph->w;
    if (ph->dropped)
        return;
    if (pause_ms > 0) {
        uint64_t until = uv_now(w->a->loop) + (uint64_t)pause_ms;
        if (until > ph->paused_until)
            ph->paused_until = until;
    }
    if (!strcmp(kind, "gone")) {
        disable(ph, "gone");
        return;
    }
    bool ok = !strcmp(kind, "ok");
    if (ok && !ph->failing)
        return;
    ph->failing = !ok;
    char after[BUF_INT_SIZE];
    buf_format_int(after, (long long)(w->a->cfg.webhook_disable_after_seconds * 1000));
    const char *argv[] = {ph->lease_key, ok ? "ok" : "fail", after};
    size_t lens[] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    ph->calls++;
    store_script(w->a->store, LUA_WHP_OUTCOME, on_outcome, ph, 1, 3, argv, lens);
}

void deliver_platform_free(webhooks *w)
{
    for (phook *ph = w->phooks, *next; ph; ph = next) {
        next = ph->next;
        for (size_t b = 0; b < PLAT_BUCKETS; b++)
            for (hook *h = ph->buckets[b], *hn; h; h = hn) {
                hn = h->next;
                hook_free(h);
            }
        free(ph->json);
        free(ph->secrets);
        free(ph);
    }
    w->phooks = NULL;
}

void deliver_platform_count(const webhooks *w, size_t *held, size_t *off)
{
    uint64_t now = uv_now(w->a->loop);
    for (const phook *ph = w->phooks; ph; ph = ph->next)
        if (!ph->dropped && ph->held && now < ph->held_until) {
            (*held)++;
            *off += !ph->enabled;
        }
}
