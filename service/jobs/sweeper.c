/* sweeper: removed members' board entries, taken off in the background (sweeper.h). */
#include "jobs/sweeper.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/app.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

/* Entities of the set read per poll, at random, so that entries waiting out their grace period
 * cannot keep others out of every poll. */
#define SWEEP_CANDIDATES 16
/* Entities this process listed lately (direct-mapped by a hash of the id). */
#define SWEEP_MEMO 64
/* The pause after a step is this many times its round trip (or SWEEP_PAUSE_MS if longer). */
#define SWEEP_PAUSE_FACTOR 3
/* A kick starts a poll this soon when the sweeper is idle. */
#define SWEEP_KICK_MS 20

typedef struct candidate {
    char id[IDS_SIZE];
    char score[24]; /* the entry's score as read ("<ms>") */
    int64_t listed_ms;
} candidate;

typedef struct listing {
    char id[IDS_SIZE];
    int64_t at_ms;
} listing;

struct sweeper {
    app *a;
    uv_timer_t timer;
    bool closed, busy, idle; /* busy: a command of ours in flight; idle: waiting for a poll */
    bool kicked;             /* a removal answered while busy: poll soon once idle again */
    candidate cand[SWEEP_CANDIDATES];
    size_t ncand, next;
    uint64_t step_sent; /* loop ms */
    listing memo[SWEEP_MEMO];
    uint64_t steps, swept, forgotten, failures;
    int64_t pending;      /* the set's size at the last poll */
    int64_t backlog;      /* tombstones left after the last step */
    char token[IDS_SIZE]; /* this process's name in a board rebuild's lease */
};

static void on_timer(uv_timer_t *t);
static void try_next(sweeper *s);

static void schedule(sweeper *s, uint64_t ms, bool idle)
{
    if (s->closed)
        return;
    if (idle && s->kicked) {
        /* a removal's tombstones may have landed after the poll or step in flight read */
        s->kicked = false;
        if (ms > SWEEP_KICK_MS)
            ms = SWEEP_KICK_MS;
    }
    s->idle = idle;
    uv_timer_start(&s->timer, on_timer, ms, 0);
}

/* An entry is dropped only this long after its last listing: a removal listed it before its
 * script was sent, and the script runs within the store's deadlines of that. */
static int64_t grace_ms(const sweeper *s)
{
    int64_t t = 2 * s->a->cfg.redis_timeout_ms + 1000;
    return t > 60000 ? t : 60000;
}

static size_t memo_slot(const char *id)
{
    uint32_t h = 2166136261u;
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % SWEEP_MEMO;
}

bool sweeper_must_list(sweeper *s, const char *id, int64_t now_ms)
{
    if (!s)
        return true;
    const listing *l = &s->memo[memo_slot(id)];
    /* Half the grace period: the entry stays at least the whole of it after that listing. */
    return strcmp(l->id, id) != 0 || now_ms < l->at_ms || now_ms - l->at_ms >= grace_ms(s) / 2;
}

void sweeper_listed(sweeper *s, const char *id, int64_t now_ms)
{
    if (!s)
        return;
    listing *l = &s->memo[memo_slot(id)];
    snprintf(l->id, sizeof l->id, "%s", id);
    l->at_ms = now_ms;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

void sweeper_send_listing(store *st, const char *id, int64_t now_ms, store_cb cb, void *data)
{
    char score[24];
    int slen = snprintf(score, sizeof score, "%lld", (long long)now_ms);
    const char *argv[] = {"ZADD", KEYS_SWEEPS, "GT", score, id};
    size_t lens[] = {4, strlen(KEYS_SWEEPS), 2, (size_t)slen, strlen(id)};
    store_command(st, cb, data, 5, argv, lens);
}

void sweeper_note_waiting(sweeper *s, const char *id)
{
    int64_t now = isotime_now_ms();
    if (!s || s->closed || !sweeper_must_list(s, id, now))
        return;
    /* Best effort, noted as listed at once: a lost listing is tried again a grace period on. */
    sweeper_listed(s, id, now);
    sweeper_send_listing(s->a->store, id, now, on_ignored, NULL);
}

/* Drops the candidate's entry unless a removal listed the entity again since it was read. */
static void forget(sweeper *s, const candidate *c)
{
    const char *argv[] = {KEYS_SWEEPS, c->id, c->score};
    size_t lens[] = {strlen(KEYS_SWEEPS), strlen(c->id), strlen(c->score)};
    store_script(s->a->store, LUA_SWEEP_FORGET, on_ignored, NULL, 1, 3, argv, lens);
    s->forgotten++;
}

static bool int_at(const redisReply *r, size_t i, long long *out)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
        return false;
    *out = r->element[i]->integer;
    return true;
}

static uint64_t pause_after(const sweeper *s, uint64_t rtt)
{
    uint64_t p = SWEEP_PAUSE_FACTOR * rtt, min = (uint64_t)s->a->cfg.sweep_pause_ms;
    return p > min ? p : min;
}

/* After a step that rebuilt boards: a rebuild can take a million members' worth of steps in a
 * row, so it keeps to a share of Redis's time, 1 / (1 + factor), measured by the step's own
 * time in Redis (a round trip seen from a loop busy with requests runs long, and paced the
 * rebuild far slower than Redis needed). At least SWEEP_PAUSE_MS. */
static uint64_t pause_after_rebuild(const sweeper *s, long long step_us)
{
    uint64_t us = step_us > 0 ? (uint64_t)step_us : 0;
    uint64_t p = ((uint64_t)s->a->cfg.board_rebuild_pause_factor * us + 999) / 1000;
    uint64_t min = (uint64_t)s->a->cfg.sweep_pause_ms;
    return p > min ? p : min;
}

static void on_step(void *data, int status, redisReply *r)
{
    sweeper *s = data;
    s->busy = false;
    if (s->closed)
        return;
    uint64_t rtt = uv_now(s->a->loop) - s->step_sent;
    const candidate *c = &s->cand[s->next];
    long long n = 0, left = 0;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || !int_at(r, 1, &n) || !int_at(r, 2, &left)) {
        /* Unreachable, late, or the slot moving: the tombstones wait for the next poll. */
        s->failures++;
        if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR &&
            strncmp(r->str, "TRYAGAIN", 8) != 0)
            log_event(LOG_WARN, "sweep step failed", r->str);
        s->next = s->ncand;
        schedule(s, (uint64_t)s->a->cfg.sweep_poll_ms, true);
        return;
    }
    const char *what = r->element[0]->str;
    if (!strcmp(what, "HELD")) {
        /* another instance holds the entity's board rebuild: its work, while its lease holds */
        s->backlog = left;
        s->next++;
        schedule(s, pause_after(s, rtt), false);
        return;
    }
    s->steps++;
    s->swept += (uint64_t)(n > 0 ? n : 0);
    s->backlog = left;
    if (!strcmp(what, "MORE")) {
        schedule(s, pause_after(s, rtt), false);
        return;
    }
    if (!strcmp(what, "REBUILD")) {
        long long step_us = 0;
        schedule(s, int_at(r, 3, &step_us) ? pause_after_rebuild(s, step_us) : pause_after(s, rtt),
                 false);
        return;
    }
    /* DONE: nothing left (a removal since lists it again first); NONE: the entity is deleted,
     * its erasure takes every key, and no removal of it can run again. */
    if (!strcmp(what, "NONE") || isotime_now_ms() - c->listed_ms > grace_ms(s))
        forget(s, c);
    s->next++;
    schedule(s, n > 0 ? pause_after(s, rtt) : 0, false);
}

static void step(sweeper *s)
{
    const candidate *c = &s->cand[s->next];
    entity_keys k;
    keys_entity(&k, c->id);
    char queue[KEYS_ENTITY_SIZE + 8], count[24], lease[24], rebuild[24];
    int qlen = snprintf(queue, sizeof queue, "%s:sweep", k.entity);
    snprintf(count, sizeof count, "%lld", (long long)s->a->cfg.sweep_step_entries);
    snprintf(lease, sizeof lease, "%lld", (long long)s->a->cfg.board_rebuild_lease_ms);
    snprintf(rebuild, sizeof rebuild, "%lld", (long long)s->a->cfg.board_rebuild_step_entries);
    const char *argv[] = {k.entity, queue, k.members, count, s->token, lease, rebuild};
    size_t lens[] = {k.entity_len,     (size_t)qlen,  k.members_len,  strlen(count),
                     strlen(s->token), strlen(lease), strlen(rebuild)};
    s->busy = true;
    s->step_sent = uv_now(s->a->loop);
    store_script(s->a->store, LUA_SWEEP_STEP, on_step, s, 3, 7, argv, lens);
}

static void try_next(sweeper *s)
{
    if (s->next >= s->ncand) {
        schedule(s, (uint64_t)s->a->cfg.sweep_poll_ms, true);
        return;
    }
    step(s);
}

/* EXEC of {ZCARD, ZRANDMEMBER n WITHSCORES}. */
static void on_poll(void *data, int status, redisReply *r)
{
    sweeper *s = data;
    s->busy = false;
    if (s->closed)
        return;
    s->ncand = s->next = 0;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_ARRAY) {
        s->pending = r->element[0]->integer;
        const redisReply *list = r->element[1];
        for (size_t i = 0; i + 1 < list->elements && s->ncand < SWEEP_CANDIDATES; i += 2) {
            const redisReply *id = list->element[i], *sc = list->element[i + 1];
            candidate *c = &s->cand[s->ncand];
            if (id->type != REDIS_REPLY_STRING || id->len != IDS_SIZE - 1 ||
                !ids_valid(id->str, id->len, 'c') || sc->type != REDIS_REPLY_STRING ||
                sc->len >= sizeof c->score)
                continue;
            memcpy(c->id, id->str, id->len);
            c->id[id->len] = '\0';
            memcpy(c->score, sc->str, sc->len);
            c->score[sc->len] = '\0';
            c->listed_ms = strtoll(c->score, NULL, 10);
            s->ncand++;
        }
    }
    try_next(s);
}

static void poll_set(sweeper *s)
{
    if (!store_ready(s->a->store) || s->a->cfg.sweep_paused) {
        schedule(s, (uint64_t)s->a->cfg.sweep_poll_ms, true);
        return;
    }
    char n[8];
    snprintf(n, sizeof n, "%d", SWEEP_CANDIDATES);
    const char *zcard[] = {"ZCARD", KEYS_SWEEPS};
    size_t zlens[] = {5, strlen(KEYS_SWEEPS)};
    const char *pick[] = {"ZRANDMEMBER", KEYS_SWEEPS, n, "WITHSCORES"};
    size_t plens[] = {11, strlen(KEYS_SWEEPS), strlen(n), 10};
    store_cmd cmds[] = {{2, zcard, zlens}, {4, pick, plens}};
    s->busy = true;
    store_exec(s->a->store, on_poll, s, 2, cmds);
}

static void on_timer(uv_timer_t *t)
{
    sweeper *s = t->data;
    if (s->closed || s->busy)
        return;
    if (s->idle) {
        s->idle = false;
        poll_set(s);
        return;
    }
    try_next(s);
}

sweeper *sweeper_new(app *a)
{
    sweeper *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->a = a;
    if (ids_new(s->token, 'r') != 0) {
        free(s);
        return NULL;
    }
    uv_timer_init(a->loop, &s->timer);
    s->timer.data = s;
    schedule(s, (uint64_t)a->cfg.sweep_poll_ms, true);
    return s;
}

void sweeper_kick(sweeper *s)
{
    if (!s || s->closed || s->a->cfg.sweep_paused)
        return;
    if (s->busy || !s->idle) {
        s->kicked = true;
        return;
    }
    if (uv_timer_get_due_in(&s->timer) > SWEEP_KICK_MS)
        schedule(s, SWEEP_KICK_MS, true);
}

void sweeper_close(sweeper *s)
{
    if (!s || s->closed)
        return;
    s->closed = true;
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, NULL);
}

void sweeper_free(sweeper *s)
{
    free(s);
}

void sweeper_render_metrics(buf *out, void *ctx)
{
    const sweeper *s = ctx;
    if (!s)
        return;
    metrics_gauge(out, "entityd_sweeps_pending",
                  "entities listed for the sweeper (entries of the sweeps set at the last poll)",
                  (double)s->pending);
    metrics_gauge(out, "entityd_sweep_backlog_entries",
                  "what waits for the sweeper (tombstoned board entries, and removed members "
                  "in the unswept set) in the entity this process swept last, after its last step",
                  (double)s->backlog);
    metrics_counter(out, "entityd_sweep_steps_total", "sweeper steps run by this process",
                    s->steps);
    metrics_counter(out, "entityd_sweep_entries_total",
                    "removed members' board entries this process took off", s->swept);
    metrics_counter(out, "entityd_sweep_forgotten_total",
                    "entities this process dropped from the sweeps set, nothing left to sweep",
                    s->forgotten);
    metrics_counter(out, "entityd_sweep_failures_total",
                    "sweeper steps that got no answer or an error (retried at the next poll)",
                    s->failures);
}
