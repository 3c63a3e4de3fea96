/* joinsweep: the re-check of rules members, in the background (joinsweep.h). */
#include "jobs/joinsweep.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "cache/readcache.h"
#include "core/app.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/hex.h"
#include "jobs/indexes.h"
#include "jobs/sweeper.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

/* Entities of the registry read per poll, the earliest due first. */
#define JS_CANDIDATES 16
/* The pause after a batch is this many times its scripts' own time in Redis: the re-check
 * takes about 1 / (1 + this) of Redis's time, so the GET path keeps 90% of its rate. */
#define JS_PAUSE_FACTOR 9
/* The sleep after Redis did not answer. */
#define JS_RETRY_MS 1000

typedef struct candidate {
    char id[IDS_SIZE];
    char score[24]; /* as read */
} candidate;

/* The batch in hand: taken (join_take.lua), evaluated, its verdicts on their way. */
typedef struct batch {
    char id[IDS_SIZE];
    long long upto; /* the latest due the take took (Redis's clock) */
    char ver[24];
    size_t n;
    char addrs[JOINEVAL_MAX_ADDRS][43];
    char verdict[JOINEVAL_MAX_ADDRS]; /* 'p', 'f' or 'e' */
    char *leaves[JOINEVAL_MAX_ADDRS]; /* the failing leaves of an 'f' (JSON), else NULL */
    joinsweep_rule rule;
    long long redis_us; /* the batch's scripts' own time in Redis */
    int64_t listed_ms;
} batch;

/* What the job waits for: a lifetime in explicit states (one command or evaluation in flight). */
enum js_state { JS_WAITING, JS_POLLING, JS_TAKING, JS_EVALUATING, JS_LISTING, JS_APPLYING };

struct joinsweep {
    app *a;
    joinread *jr;
    joinsweep_build build;
    void *build_ctx;
    uv_timer_t timer;
    enum js_state state;
    bool closed;
    char token[IDS_SIZE]; /* this process's name in the leases */
    candidate cand[JS_CANDIDATES];
    size_t ncand, next;
    int64_t wake_ms; /* the poll's earliest score after its time, or -1 */
    bool worked;     /* a batch ran since the poll */
    batch b;
    uint64_t batches, checked, lapsed, held, stale, failures;
    int64_t last_batch; /* members in the last batch taken */
};

static void on_timer(uv_timer_t *t);
static void try_next(joinsweep *s);
static void take(joinsweep *s);

static int64_t period_ms(const joinsweep *s)
{
    return s->a->cfg.join_recheck_seconds * 1000;
}

/* The longest sleep between two looks at the registry (JOIN_POLL_MS, at most a period). */
static int64_t poll_ms(const joinsweep *s)
{
    int64_t p = period_ms(s);
    return s->a->cfg.join_poll_ms < p ? s->a->cfg.join_poll_ms : p;
}

static void schedule(joinsweep *s, uint64_t ms)
{
    s->state = JS_WAITING;
    if (!s->closed)
        uv_timer_start(&s->timer, on_timer, ms, 0);
}

static void batch_clear(batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->leaves[i]);
        b->leaves[i] = NULL;
    }
    free(b->rule.tree_mem);
    b->rule.tree_mem = NULL;
    b->n = 0;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

/* The registry's score of the entity: its earliest due, or a period on when it has none (a
 * join lists it lower, ZADD LT; dropping it would race a join that lists it meanwhile). */
static void registry_set(joinsweep *s, const char *id, long long earliest)
{
    char score[24];
    if (earliest < 0)
        earliest = isotime_now_ms() + period_ms(s);
    int slen = snprintf(score, sizeof score, "%lld", earliest);
    const char *argv[] = {"ZADD", KEYS_JOINS, score, id};
    size_t lens[] = {4, strlen(KEYS_JOINS), (size_t)slen, strlen(id)};
    store_command(s->a->store, on_ignored, NULL, 4, argv, lens);
}

/* No entity or no rule: nothing of it is re-checked, unless a join listed it earlier since. */
static void registry_forget(joinsweep *s, const candidate *c)
{
    const char *argv[] = {KEYS_JOINS, c->id, c->score};
    size_t lens[] = {strlen(KEYS_JOINS), strlen(c->id), strlen(c->score)};
    store_script(s->a->store, LUA_JOINS_FORGET, on_ignored, NULL, 1, 3, argv, lens);
}

static bool int_at(const redisReply *r, size_t i, long long *out)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
        return false;
    *out = r->element[i]->integer;
    return true;
}

static bool str_at(const redisReply *r, size_t i, char *out, size_t cap)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_STRING || r->element[i]->len >= cap)
        return false;
    memcpy(out, r->element[i]->str, r->element[i]->len);
    out[r->element[i]->len] = '\0';
    return true;
}

static uint64_t pause_after(long long redis_us)
{
    uint64_t us = redis_us > 0 ? (uint64_t)redis_us : 0;
    uint64_t p = (JS_PAUSE_FACTOR * us + 999) / 1000;
    return p > 0 ? p : 1;
}

/* A store failure or an unexpected reply: the entity waits for the next poll. */
static void failed(joinsweep *s, int status, const redisReply *r, const char *what)
{
    s->failures++;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "TRYAGAIN", 8) != 0)
        log_event(LOG_WARN, what, r->str);
    s->next = s->ncand;
    schedule(s, JS_RETRY_MS);
}

/* ---- verdicts ---- */

/* join_verdicts.lua: {status, earliest due, µs, {boards}, {removed addresses}}. */
static void on_applied(void *data, int status, redisReply *r)
{
    joinsweep *s = data;
    batch *b = &s->b;
    batch_clear(b);
    if (s->closed)
        return;
    char what[8];
    long long earliest = -1, us = 0;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
        !str_at(r, 0, what, sizeof what) || !int_at(r, 1, &earliest) || !int_at(r, 2, &us) ||
        r->element[3]->type != REDIS_REPLY_ARRAY || r->element[4]->type != REDIS_REPLY_ARRAY) {
        failed(s, status, r, "join re-check: verdicts failed");
        return;
    }
    b->redis_us += us;
    const candidate *c = &s->cand[s->next];
    if (!strcmp(what, "NONE")) {
        registry_forget(s, c);
        s->next++;
        try_next(s);
        return;
    }
    if (!strcmp(what, "LOST")) { /* another instance took the entity over: its members now */
        s->held++;
        s->next++;
        try_next(s);
        return;
    }
    if (!strcmp(what, "STALE")) { /* the rule changed: its members are due still */
        s->stale++;
        schedule(s, pause_after(b->redis_us));
        return;
    }
    const redisReply *boards = r->element[3], *gone = r->element[4];
    readcache *rc = s->a->reads;
    for (size_t i = 0; rc && readcache_enabled(rc) && i < boards->elements; i++) {
        const redisReply *by = boards->element[i];
        if (by->type == REDIS_REPLY_STRING && by->len == 2 && !memcmp(by->str, "xp", 2)) {
            char key[KEYS_BOARD_SIZE];
            readcache_invalidate(rc, key, keys_board(key, b->id, "xp"));
        }
    }
    if (gone->elements > 0) {
        char(*addrs)[43] = calloc(gone->elements, sizeof *addrs);
        size_t n = 0;
        for (size_t i = 0; addrs && i < gone->elements; i++)
            if (gone->element[i]->type == REDIS_REPLY_STRING && gone->element[i]->len == 42)
                memcpy(addrs[n++], gone->element[i]->str, 42);
        if (n > 0)
            indexes_drop_roles(s->a, b->id, (const char(*)[43])addrs, n, INDEXES_MEMBER, false);
        free(addrs);
        s->lapsed += gone->elements;
        sweeper_kick(s->a->sweeper);
    }
    /* The entity's next batch no sooner than the end of the window this one took (upto: its
     * take's time plus the time 500 of its members take to come due, spread evenly over the
     * period): members whose dues bunched (many joins at once) are re-checked spread over a
     * period, 500 a window, rather than all at once at the pace of the Redis pauses. */
    long long next = earliest >= 0 && earliest < b->upto ? b->upto : earliest;
    registry_set(s, b->id, next);
    if (next >= 0 && (s->wake_ms < 0 || next < s->wake_ms))
        s->wake_ms = next;
    s->next++;
    schedule(s, pause_after(b->redis_us));
}

static void apply(joinsweep *s)
{
    batch *b = &s->b;
    entity_keys k;
    keys_entity(&k, b->id);
    char join[KEYS_ENTITY_SIZE + 8], due[KEYS_ENTITY_SIZE + 12], failing[KEYS_ENTITY_SIZE + 16],
        lease[KEYS_ENTITY_SIZE + 16];
    snprintf(join, sizeof join, "%s:join", k.entity);
    snprintf(due, sizeof due, "%s:join:due", k.entity);
    snprintf(failing, sizeof failing, "%s:join:failing", k.entity);
    snprintf(lease, sizeof lease, "%s:join:lease", k.entity);
    char limits[48], lease_ms[24], period[24], grace[24], taken[24], version[17];
    snprintf(limits, sizeof limits, "%lld:%lld", (long long)s->a->cfg.events_max,
             (long long)s->a->cfg.events_max_bytes);
    snprintf(lease_ms, sizeof lease_ms, "%lld", (long long)s->a->cfg.join_lease_ms);
    snprintf(period, sizeof period, "%lld", (long long)period_ms(s));
    snprintf(grace, sizeof grace, "%lld", (long long)s->a->cfg.join_grace_seconds * 1000);
    snprintf(taken, sizeof taken, "%lld", b->upto);
    /* A fresh members version: cached users pages of the old list are never served again. */
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        batch_clear(b);
        failed(s, STORE_OK, NULL, "join re-check: no randomness");
        return;
    }
    hex_encode(rnd, sizeof rnd, version);
    const char *head[] = {k.entity, k.members, k.order, join,  due,   failing, lease,  limits,
                          s->token, lease_ms,  period,  grace, taken, b->ver,  version};
    enum { NKEYS = 7, NHEAD = 15 };
    size_t argc = NHEAD + 3 * b->n;
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    if (!argv || !lens) {
        free(argv);
        free(lens);
        batch_clear(b);
        failed(s, STORE_OK, NULL, "join re-check: out of memory");
        return;
    }
    for (size_t i = 0; i < NHEAD; i++) {
        argv[i] = head[i];
        lens[i] = strlen(head[i]);
    }
    for (size_t i = 0; i < b->n; i++) {
        size_t at = NHEAD + 3 * i;
        argv[at] = b->addrs[i];
        lens[at] = 42;
        argv[at + 1] = &b->verdict[i];
        lens[at + 1] = 1;
        argv[at + 2] = b->leaves[i] ? b->leaves[i] : "";
        lens[at + 2] = strlen(argv[at + 2]);
    }
    s->state = JS_APPLYING;
    store_script(s->a->store, LUA_JOIN_VERDICTS, on_applied, s, NKEYS, (int)argc, argv, lens);
    free(argv);
    free(lens);
}

/* The entity is in the sweeps set: now the lapses may leave tombstones for the sweeper. */
static void on_listed(void *data, int status, redisReply *r)
{
    joinsweep *s = data;
    if (s->closed) {
        batch_clear(&s->b);
        return;
    }
    if (status != STORE_OK || !r || r->type == REDIS_REPLY_ERROR) {
        batch_clear(&s->b);
        failed(s, status, r, "join re-check: sweeps listing failed");
        return;
    }
    sweeper_listed(s->a->sweeper, s->b.id, s->b.listed_ms);
    apply(s);
}

/* A removal lists the entity in the sweeps set first (jobs/sweeper.h), so that its tombstones
 * are found whatever crashes in between; only a batch with a failure may remove. */
static void list_then_apply(joinsweep *s)
{
    batch *b = &s->b;
    bool any = false;
    for (size_t i = 0; i < b->n && !any; i++)
        any = b->verdict[i] == 'f';
    int64_t now = isotime_now_ms();
    if (!any || !sweeper_must_list(s->a->sweeper, b->id, now)) {
        apply(s);
        return;
    }
    b->listed_ms = now;
    s->state = JS_LISTING;
    sweeper_send_listing(s->a->store, b->id, now, on_listed, s);
}

static json_t *str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

/* The failing leaves of address a as the join's refusal lists them (CONTRACT section 16): every
 * leaf not true, {"path","ok":false,"have","need"} or {"path","error"}. */
static char *failing_leaves(const batch *b, const joineval_answer *ans, size_t a)
{
    json_t *list = json_array();
    for (int l = 0; list && l < ans->nleaves; l++) {
        const joineval_value *v = &ans->v[a * (size_t)ans->nleaves + (size_t)l];
        if (v->truth == JOINEVAL_TRUE)
            continue;
        json_t *leaf = json_object();
        json_object_set_new(leaf, "path", str_or_null(b->rule.path[l]));
        if (v->truth == JOINEVAL_ERROR) {
            json_object_set_new(leaf, "error",
                                json_string(v->error ? v->error : "This leaf could not be read."));
        } else {
            json_object_set_new(leaf, "ok", json_false());
            json_object_set_new(leaf, "have", str_or_null(v->have));
            json_object_set_new(leaf, "need", str_or_null(joineval_need(&b->rule.eval, l)));
        }
        json_array_append_new(list, leaf);
    }
    char *out = list ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    return out;
}

static void on_evaluated(void *data, const joineval_answer *ans)
{
    joinsweep *s = data;
    batch *b = &s->b;
    if (s->closed) {
        batch_clear(b);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        int v = ans->status == JOINEVAL_OK && i < ans->naddrs ? ans->verdict[i] : JOINEVAL_ERROR;
        /* a chain that did not answer makes every verdict an error: nothing counts */
        if (ans->status != JOINEVAL_OK)
            v = JOINEVAL_ERROR;
        b->verdict[i] = v == JOINEVAL_TRUE ? 'p' : v == JOINEVAL_FALSE ? 'f' : 'e';
        if (b->verdict[i] == 'f' && !(b->leaves[i] = failing_leaves(b, ans, i)))
            b->verdict[i] = 'e'; /* out of memory: checked again next period */
    }
    s->checked += b->n;
    list_then_apply(s);
}

/* Every verdict an error: the members are due a period on, and nothing counts. */
static void all_errors(joinsweep *s)
{
    memset(s->b.verdict, 'e', s->b.n);
    apply(s);
}

static void evaluate(joinsweep *s, const char *json, size_t len, const char *author)
{
    batch *b = &s->b;
    memset(&b->rule, 0, sizeof b->rule);
    if (s->build(s->build_ctx, json, len, author, &b->rule) != 0) {
        log_event(LOG_WARN, "join re-check: a stored rule does not parse", b->id);
        all_errors(s);
        return;
    }
    s->state = JS_EVALUATING;
    if (joineval_start(s->a->loop, s->a->store, s->jr, &b->rule.eval, (const char(*)[43])b->addrs,
                       b->n, true, on_evaluated, s) != 0)
        all_errors(s);
}

/* ---- takes ---- */

/* join_take.lua: {'NONE'} | {'HELD', ms} | {'IDLE', earliest} | {'BATCH', now, rule, author,
 * ver, µs, the latest due taken, address...}. */
static void on_taken(void *data, int status, redisReply *r)
{
    joinsweep *s = data;
    if (s->closed)
        return;
    char what[8];
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        !str_at(r, 0, what, sizeof what)) {
        failed(s, status, r, "join re-check: take failed");
        return;
    }
    const candidate *c = &s->cand[s->next];
    long long v = 0;
    if (!strcmp(what, "NONE")) {
        registry_forget(s, c);
        s->next++;
        try_next(s);
        return;
    }
    if (!strcmp(what, "HELD") || !strcmp(what, "IDLE")) {
        int64_t at = -1;
        if (!strcmp(what, "HELD")) {
            s->held++;
            if (int_at(r, 1, &v) && v > 0)
                at = isotime_now_ms() + v; /* its lease ends */
        } else if (int_at(r, 1, &v)) {
            registry_set(s, c->id, v);
            at = v;
        }
        if (at >= 0 && (s->wake_ms < 0 || at < s->wake_ms))
            s->wake_ms = at;
        s->next++;
        try_next(s);
        return;
    }
    batch *b = &s->b;
    char author[43];
    long long us = 0;
    const redisReply *rule = r->elements > 2 ? r->element[2] : NULL;
    long long now = 0;
    if (strcmp(what, "BATCH") != 0 || r->elements < 8 || !int_at(r, 1, &now) || !rule ||
        rule->type != REDIS_REPLY_STRING || !str_at(r, 3, author, sizeof author) ||
        !str_at(r, 4, b->ver, sizeof b->ver) || !int_at(r, 5, &us) || !int_at(r, 6, &b->upto)) {
        failed(s, status, r, "join re-check: unexpected take");
        return;
    }
    memcpy(b->id, c->id, IDS_SIZE);
    b->redis_us = us;
    b->n = 0;
    for (size_t i = 7; i < r->elements && b->n < JOINEVAL_MAX_ADDRS; i++)
        if (str_at(r, i, b->addrs[b->n], sizeof b->addrs[0]) && strlen(b->addrs[b->n]) == 42)
            b->leaves[b->n++] = NULL;
    s->worked = true;
    s->batches++;
    s->last_batch = (int64_t)b->n;
    if (b->n == 0) { /* nothing the service wrote: left to the next period's look */
        s->next++;
        schedule(s, pause_after(us));
        return;
    }
    evaluate(s, rule->str, rule->len, author);
}

static void take(joinsweep *s)
{
    const candidate *c = &s->cand[s->next];
    entity_keys k;
    keys_entity(&k, c->id);
    char join[KEYS_ENTITY_SIZE + 8], due[KEYS_ENTITY_SIZE + 12], lease[KEYS_ENTITY_SIZE + 16];
    int jl = snprintf(join, sizeof join, "%s:join", k.entity);
    int dl = snprintf(due, sizeof due, "%s:join:due", k.entity);
    int ll = snprintf(lease, sizeof lease, "%s:join:lease", k.entity);
    char lease_ms[24], most[24];
    snprintf(lease_ms, sizeof lease_ms, "%lld", (long long)s->a->cfg.join_lease_ms);
    snprintf(most, sizeof most, "%d", JOINEVAL_MAX_ADDRS);
    char period[24];
    snprintf(period, sizeof period, "%lld", (long long)period_ms(s));
    const char *argv[] = {k.entity, join, due, lease, s->token, lease_ms, most, period};
    size_t lens[] = {k.entity_len,     (size_t)jl,       (size_t)dl,   (size_t)ll,
                     strlen(s->token), strlen(lease_ms), strlen(most), strlen(period)};
    s->state = JS_TAKING;
    store_script(s->a->store, LUA_JOIN_TAKE, on_taken, s, 4, 8, argv, lens);
}

/* ---- the registry ---- */

static void try_next(joinsweep *s)
{
    if (s->next < s->ncand) {
        take(s);
        return;
    }
    if (s->worked) { /* more may be due: look again soon */
        schedule(s, 1);
        return;
    }
    /* Asleep until the earliest due the registry holds, or a period on when it holds none: a
     * join lists its entity a period after it at the earliest, and a re-check moves a score
     * only later, so nothing comes due before that. JOIN_POLL_MS bounds the sleep, so that
     * what another instance left overdue (it died) waits no longer than that. */
    int64_t now = isotime_now_ms(), most = poll_ms(s);
    int64_t wait = s->wake_ms < 0 ? most : s->wake_ms - now;
    if (wait > most)
        wait = most;
    schedule(s, (uint64_t)(wait > 10 ? wait : 10));
}

/* ZRANGEBYSCORE joins -inf +inf WITHSCORES LIMIT 0 n: the earliest due entities. */
static void on_polled(void *data, int status, redisReply *r)
{
    joinsweep *s = data;
    if (s->closed)
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY) {
        failed(s, status, r, "join re-check: registry read failed");
        return;
    }
    int64_t now = isotime_now_ms();
    s->ncand = s->next = 0;
    s->wake_ms = -1;
    s->worked = false;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *id = r->element[i], *sc = r->element[i + 1];
        if (id->type != REDIS_REPLY_STRING || id->len != IDS_SIZE - 1 ||
            !ids_valid(id->str, id->len, 'c') || sc->type != REDIS_REPLY_STRING ||
            sc->len >= sizeof s->cand[0].score)
            continue;
        char score[24];
        memcpy(score, sc->str, sc->len);
        score[sc->len] = '\0';
        int64_t due = (int64_t)strtoll(score, NULL, 10);
        if (due > now) { /* sorted: the rest are later */
            s->wake_ms = due;
            break;
        }
        candidate *c = &s->cand[s->ncand++];
        memcpy(c->id, id->str, id->len);
        c->id[id->len] = '\0';
        memcpy(c->score, score, sc->len + 1);
        if (s->ncand == JS_CANDIDATES)
            break;
    }
    try_next(s);
}

static void poll_registry(joinsweep *s)
{
    if (!store_ready(s->a->store)) {
        schedule(s, JS_RETRY_MS);
        return;
    }
    char n[8];
    snprintf(n, sizeof n, "%d", JS_CANDIDATES);
    const char *argv[] = {"ZRANGEBYSCORE", KEYS_JOINS, "-inf", "+inf",
                          "WITHSCORES",    "LIMIT",    "0",    n};
    size_t lens[] = {13, strlen(KEYS_JOINS), 4, 4, 10, 5, 1, strlen(n)};
    s->state = JS_POLLING;
    store_command(s->a->store, on_polled, s, 8, argv, lens);
}

static void on_timer(uv_timer_t *t)
{
    joinsweep *s = t->data;
    if (s->closed || s->state != JS_WAITING)
        return;
    /* after a batch: the next entity due (or the same, its batch dropped as stale), else a
     * fresh look at the registry */
    if (s->worked && s->next < s->ncand)
        take(s);
    else
        poll_registry(s);
}

joinsweep *joinsweep_new(app *a, joinread *jr, joinsweep_build build, void *build_ctx)
{
    joinsweep *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->a = a;
    s->jr = jr;
    s->build = build;
    s->build_ctx = build_ctx;
    s->wake_ms = -1;
    if (ids_new(s->token, 'r') != 0) {
        free(s);
        return NULL;
    }
    uv_timer_init(a->loop, &s->timer);
    s->timer.data = s;
    /* Not at once: instances started together (a rollout) look at the registry when their
     * poll comes, and a test counting a request's Redis commands can push the look out. */
    schedule(s, (uint64_t)poll_ms(s));
    return s;
}

void joinsweep_close(joinsweep *s)
{
    if (!s || s->closed)
        return;
    s->closed = true;
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, NULL);
}

void joinsweep_free(joinsweep *s)
{
    if (!s)
        return;
    batch_clear(&s->b);
    free(s);
}

void joinsweep_render_metrics(buf *out, void *ctx)
{
    const joinsweep *s = ctx;
    if (!s)
        return;
    metrics_counter(out, "entityd_join_recheck_batches_total",
                    "batches of rules members this process re-checked", s->batches);
    metrics_counter(out, "entityd_join_recheck_members_total",
                    "rules members this process re-checked", s->checked);
    metrics_counter(out, "entityd_join_lapsed_total",
                    "rules members this process removed for failing their rule", s->lapsed);
    metrics_counter(out, "entityd_join_recheck_held_total",
                    "entities due whose re-check another instance held (its lease)", s->held);
    metrics_counter(out, "entityd_join_recheck_stale_total",
                    "batches dropped because the rule changed while they were evaluated", s->stale);
    metrics_counter(out, "entityd_join_recheck_failures_total",
                    "re-check commands that got no answer or an error (retried later)",
                    s->failures);
    metrics_gauge(out, "entityd_join_recheck_last_batch",
                  "members in the last batch this process took", (double)s->last_batch);
}
