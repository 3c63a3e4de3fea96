/* erasure: the background erasure of deleted entities (erasure.h). */
#include "jobs/erasure.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "core/app.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

/* An alias claim token (resources/entities.c: 16 hex digits) and room to spare. */
#define ALIAS_TOKEN_SIZE 48
/* Entries of the set read per poll: enough to step past a few held by other instances. */
#define ERASURE_CANDIDATES 16
/* The most a step that unlinked nothing pauses (erasure_pause): the pace the whole erasure had
 * before unlinking steps were slowed down. */
#define ERASE_SCAN_PAUSE_MS 2

typedef struct candidate {
    char id[IDS_SIZE];
    char entry[IDS_SIZE + 48]; /* "<entity id>:<ms>:<token>" as in the set, or "" */
    int64_t since_ms;          /* the delete request's time */
} candidate;

struct erasure {
    app *a;
    uv_timer_t timer;
    bool closed, busy; /* busy: a command of ours is in flight (one at a time) */
    char token[17];    /* this process's lease token */
    candidate cand[ERASURE_CANDIDATES];
    size_t ncand, next;     /* candidates of the last poll, the next one to try */
    char current[IDS_SIZE]; /* the erasure this instance holds the lease of, or "" */
    /* The alias claim token released for current ("" none yet), and the one on its way. */
    char released[ALIAS_TOKEN_SIZE], releasing[ALIAS_TOKEN_SIZE];
    uint64_t steps, keys, finished, started, failures;
    int64_t pending; /* the set's size at the last poll */
};

static void poll_set(erasure *e);
static void try_next(erasure *e);
static void on_timer(uv_timer_t *t);

static void schedule(erasure *e, uint64_t ms)
{
    if (!e->closed)
        uv_timer_start(&e->timer, on_timer, ms, 0);
}

/* The pause after a step that unlinked n keys. Unlinking is what a concurrent load feels (the
 * UNLINKs, and the lazy-free thread freeing the big collections on a CPU of its own): such a
 * step pauses ERASE_PAUSE_MS. A step that found nothing to unlink (the scan through other
 * entities' keys, and the final pass) cost Redis only its SCAN and pauses at most
 * ERASE_SCAN_PAUSE_MS, so that a node holding many other keys is not crossed at the slow pace. */
static uint64_t erasure_pause(const erasure *e, long long n)
{
    uint64_t p = (uint64_t)e->a->cfg.erase_pause_ms;
    return n > 0 || p < ERASE_SCAN_PAUSE_MS ? p : ERASE_SCAN_PAUSE_MS;
}

static void on_timer(uv_timer_t *t)
{
    erasure *e = t->data;
    if (e->closed || e->busy)
        return;
    if (e->current[0]) {
        /* Go on with the erasure this instance holds. */
        e->ncand = e->next = 0;
        memcpy(e->cand[0].id, e->current, IDS_SIZE);
        e->cand[0].entry[0] = '\0';
        e->cand[0].since_ms = isotime_now_ms();
        e->ncand = 1;
        try_next(e);
        return;
    }
    poll_set(e);
}

/* An entry older than this whose record is absent will never get one: its delete was refused,
 * or its erasure ended between deleting the record and removing the entry. Younger, its
 * delete script may still be on its way (another instance's, or a late one). */
static int64_t grace_ms(const erasure *e)
{
    int64_t t = 2 * e->a->cfg.redis_timeout_ms + 1000;
    return t > 60000 ? t : 60000;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

/* Drops one request's entry: its delete never made a record (refused, or never run). */
static void forget_entry(erasure *e, const char *entry)
{
    const char *argv[] = {"ZREM", KEYS_ERASURES, entry};
    size_t lens[] = {4, strlen(KEYS_ERASURES), strlen(entry)};
    if (*entry)
        store_command(e->a->store, on_ignored, NULL, 3, argv, lens);
}

/* Drops every entry of an erased entity: the record is gone, the entity hash was gone before
 * it, so any delete of it still on its way is refused and makes no record. */
static void forget_entity(erasure *e, const char *id)
{
    char from[IDS_SIZE + 3], to[IDS_SIZE + 3];
    snprintf(from, sizeof from, "[%s:", id);
    snprintf(to, sizeof to, "(%s;", id);
    const char *argv[] = {"ZREMRANGEBYLEX", KEYS_ERASURES, from, to};
    size_t lens[] = {14, strlen(KEYS_ERASURES), strlen(from), strlen(to)};
    store_command(e->a->store, on_ignored, NULL, 4, argv, lens);
}

static void log_erasure(const char *msg, const char *id, int64_t erased)
{
    buf *l = log_begin(LOG_INFO, msg);
    if (l) {
        log_str(l, "entity", id);
        if (erased >= 0)
            log_int(l, "keysErased", erased);
        log_end(l);
    }
}

static void on_release(void *data, int status, redisReply *r)
{
    erasure *e = data;
    e->busy = false;
    if (e->closed)
        return;
    if (status != STORE_OK || !r || r->type == REDIS_REPLY_ERROR) {
        e->failures++; /* the step answers RELEASE again at the next poll */
        schedule(e, (uint64_t)e->a->cfg.erase_poll_ms);
        return;
    }
    memcpy(e->released, e->releasing, sizeof e->released);
    schedule(e, 0);
}

/* {'RELEASE', n, erased, alias, claim token}: the claim goes, by its exact token (a claim taken
 * over meanwhile stays), in the alias's slot; the next step then deletes the record. */
static void release_claim(erasure *e, const char *id, const redisReply *r)
{
    const redisReply *alias = r->elements == 5 ? r->element[3] : NULL;
    const redisReply *token = r->elements == 5 ? r->element[4] : NULL;
    char key[KEYS_ALIAS_SIZE];
    size_t klen = 0;
    if (alias && token && alias->type == REDIS_REPLY_STRING && token->type == REDIS_REPLY_STRING &&
        alias->len > 0 && alias->len < 70 && token->len > 0 && token->len < sizeof e->releasing)
        klen = keys_alias(key, alias->str);
    if (!klen) {
        log_event(LOG_WARN, "erasure step failed", "RELEASE without an alias claim");
        e->failures++;
        schedule(e, (uint64_t)e->a->cfg.erase_poll_ms);
        return;
    }
    memcpy(e->releasing, token->str, token->len + 1);
    const char *argv[] = {key, id, token->str};
    size_t lens[] = {klen, strlen(id), token->len};
    e->busy = true;
    store_script(e->a->store, LUA_ALIAS_RELEASE, on_release, e, 1, 3, argv, lens);
}

static bool int_at(const redisReply *r, size_t i, long long *out)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
        return false;
    *out = r->element[i]->integer;
    return true;
}

static void on_step(void *data, int status, redisReply *r)
{
    erasure *e = data;
    e->busy = false;
    candidate *c = &e->cand[e->next];
    if (e->closed)
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        /* Unreachable, late, or the slot moving: the lease keeps the erasure ours for a while;
         * try again at the next poll. */
        e->failures++;
        if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR &&
            strncmp(r->str, "TRYAGAIN", 8) != 0)
            log_event(LOG_WARN, "erasure step failed", r->str);
        schedule(e, (uint64_t)e->a->cfg.erase_poll_ms);
        return;
    }
    const char *what = r->element[0]->str;
    long long n = 0, total = 0;
    bool release = !strcmp(what, "RELEASE");
    if (!strcmp(what, "MORE") || !strcmp(what, "DONE") || release) {
        int_at(r, 1, &n);
        int_at(r, 2, &total);
        e->steps++;
        e->keys += (uint64_t)(n > 0 ? n : 0);
        if (strcmp(e->current, c->id) != 0) {
            memcpy(e->current, c->id, IDS_SIZE);
            e->released[0] = '\0';
            e->started++;
            log_erasure("erasure started", c->id, -1);
        }
    }
    if (!strcmp(what, "MORE")) {
        schedule(e, erasure_pause(e, n));
        return;
    }
    if (release) {
        release_claim(e, c->id, r);
        return;
    }
    if (!strcmp(what, "DONE")) {
        e->finished++;
        e->current[0] = e->released[0] = '\0';
        log_erasure("erasure finished", c->id, total);
        /* The record is gone (its alias claim released before it, RELEASE): the entry may go. */
        forget_entity(e, c->id);
        schedule(e, 0);
        return;
    }
    if (!strcmp(what, "NONE") && isotime_now_ms() - c->since_ms > grace_ms(e))
        forget_entry(e, c->entry);
    if (!strcmp(e->current, c->id))
        e->current[0] = '\0'; /* lost the lease, or the record: look again */
    e->next++;
    try_next(e);
}

static void try_next(erasure *e)
{
    if (e->next >= e->ncand) {
        schedule(e, (uint64_t)e->a->cfg.erase_poll_ms);
        return;
    }
    candidate *c = &e->cand[e->next];
    entity_keys k;
    keys_entity(&k, c->id);
    char rec[KEYS_ENTITY_SIZE], lease[24], count[24];
    size_t rlen = keys_erasure(rec, c->id);
    snprintf(lease, sizeof lease, "%lld", (long long)e->a->cfg.erase_lease_ms);
    snprintf(count, sizeof count, "%lld", (long long)e->a->cfg.erase_step_keys);
    const char *released = strcmp(c->id, e->current) ? "" : e->released;
    const char *argv[] = {rec,   k.entity, e->token,        lease,
                          count, released, KEYS_ERASE_SCAN, KEYS_ERASE_IDS};
    size_t lens[] = {
        rlen,          k.entity_len,     strlen(e->token),        strlen(lease),
        strlen(count), strlen(released), strlen(KEYS_ERASE_SCAN), strlen(KEYS_ERASE_IDS)};
    e->busy = true;
    store_script(e->a->store, LUA_ERASE_STEP, on_step, e, 1, 8, argv, lens);
}

/* Reads "<entity id>:<ms>:<token>" into c; false when it is not one. */
static bool parse_entry(const redisReply *r, candidate *c)
{
    if (r->type != REDIS_REPLY_STRING || r->len >= sizeof c->entry || r->len < IDS_SIZE ||
        r->str[IDS_SIZE - 1] != ':' || !ids_valid(r->str, IDS_SIZE - 1, 'c'))
        return false;
    memcpy(c->entry, r->str, r->len);
    c->entry[r->len] = '\0';
    memcpy(c->id, r->str, IDS_SIZE - 1);
    c->id[IDS_SIZE - 1] = '\0';
    c->since_ms = strtoll(r->str + IDS_SIZE, NULL, 10);
    return true;
}

/* EXEC of {ZCARD, ZRANDMEMBER n}: entries at random, so that entries waiting out their grace
 * period (or held by other instances) cannot keep an erasure out of every poll. */
static void on_poll(void *data, int status, redisReply *r)
{
    erasure *e = data;
    e->busy = false;
    if (e->closed)
        return;
    e->ncand = e->next = 0;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_ARRAY) {
        e->pending = r->element[0]->integer;
        const redisReply *list = r->element[1];
        for (size_t i = 0; i < list->elements && e->ncand < ERASURE_CANDIDATES; i++)
            if (parse_entry(list->element[i], &e->cand[e->ncand]))
                e->ncand++;
    }
    try_next(e);
}

static void poll_set(erasure *e)
{
    if (!store_ready(e->a->store)) {
        schedule(e, (uint64_t)e->a->cfg.erase_poll_ms);
        return;
    }
    char n[8];
    snprintf(n, sizeof n, "%d", ERASURE_CANDIDATES);
    const char *zcard[] = {"ZCARD", KEYS_ERASURES};
    size_t zlens[] = {5, strlen(KEYS_ERASURES)};
    const char *pick[] = {"ZRANDMEMBER", KEYS_ERASURES, n};
    size_t plens[] = {11, strlen(KEYS_ERASURES), strlen(n)};
    store_cmd cmds[] = {{2, zcard, zlens}, {3, pick, plens}};
    e->busy = true;
    store_exec(e->a->store, on_poll, e, 2, cmds);
}

erasure *erasure_new(app *a)
{
    erasure *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->a = a;
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(e);
        return NULL;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof rnd; i++) {
        e->token[2 * i] = hex[rnd[i] >> 4];
        e->token[2 * i + 1] = hex[rnd[i] & 15];
    }
    uv_timer_init(a->loop, &e->timer);
    e->timer.data = e;
    uv_timer_start(&e->timer, on_timer, (uint64_t)a->cfg.erase_poll_ms, 0);
    return e;
}

void erasure_kick(erasure *e)
{
    if (e && !e->closed && !e->busy && !e->current[0])
        uv_timer_start(&e->timer, on_timer, 0, 0);
}

void erasure_close(erasure *e)
{
    if (!e || e->closed)
        return;
    e->closed = true;
    uv_timer_stop(&e->timer);
    uv_close((uv_handle_t *)&e->timer, NULL);
}

void erasure_free(erasure *e)
{
    free(e);
}

void erasure_render_metrics(buf *out, void *ctx)
{
    const erasure *e = ctx;
    if (!e)
        return;
    metrics_gauge(out, "entityd_erasures_pending",
                  "delete requests whose erasure is not finished (entries of the erasures set at "
                  "the last poll)",
                  (double)e->pending);
    metrics_gauge(out, "entityd_erasure_active", "1 while this process holds an erasure's lease",
                  e->current[0] ? 1.0 : 0.0);
    metrics_counter(out, "entityd_erasure_steps_total", "erasure steps run by this process",
                    e->steps);
    metrics_counter(out, "entityd_erasure_keys_total", "keys of deleted entities unlinked",
                    e->keys);
    metrics_counter(out, "entityd_erasures_started_total",
                    "erasures this process began or took over", e->started);
    metrics_counter(out, "entityd_erasures_finished_total", "erasures this process finished",
                    e->finished);
    metrics_counter(out, "entityd_erasure_failures_total",
                    "erasure steps that got no answer or an error (retried)", e->failures);
}
