/* findindex: adds before a write and their undo (findindex.h); the drops: jobs/indexes.c. */
#include "resources/findindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/app.h"
#include "api/respond.h"
#include "core/buf.h"
#include "crypto/hex.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

/* One findindex_add or findindex_undo: answers counted down to the one call of done. */
typedef struct add_state {
    request *req;
    findindex_done done;
    size_t pending;
    int status;
    findindex_added *added;
} add_state;

/* One script call of an add: the wallets added[at..at+n) or, with n 0, the directory. */
typedef struct add_call {
    add_state *s;
    size_t at, n;
} add_call;

static void add_answered(add_state *s, int status)
{
    if (status != STORE_OK && s->status == STORE_OK)
        s->status = status;
    if (--s->pending == 0)
        s->done(s->req, s->status);
}

static const char *pool_copy(request *req, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING)
        return NULL;
    char *c = arena_alloc(&req->pool, r->len + 1);
    if (c) {
        memcpy(c, r->str, r->len);
        c[r->len] = '\0';
    }
    return c;
}

/* Keeps what the call wrote (find_wallet_add.lua and find_dir_add.lua's answers). */
static void record_added(add_call *c, const redisReply *r)
{
    findindex_added *ad = c->s->added;
    request *req = c->s->req;
    if (!ad || r->type != REDIS_REPLY_ARRAY)
        return;
    if (c->n == 0) {
        if (r->elements != 4 || r->element[2]->type != REDIS_REPLY_INTEGER ||
            r->element[3]->type != REDIS_REPLY_INTEGER)
            return;
        if (!r->element[2]->integer)
            ad->dir_created[0] = '\0';
        if (!r->element[3]->integer)
            ad->dir_name[0] = '\0';
        ad->dir_prior = pool_copy(req, r->element[1]);
        ad->dir_written = ad->dir_prior ? pool_copy(req, r->element[0]) : NULL;
        return;
    }
    if (r->elements != 3 * c->n)
        return;
    for (size_t i = 0; i < c->n; i++) {
        findindex_undo_wallet *w = &ad->w[c->at + i];
        const redisReply *g = r->element[3 * i + 2];
        if (g->type != REDIS_REPLY_STRING || g->len >= sizeof w->gained)
            continue;
        memcpy(w->gained, g->str, g->len + 1);
        w->prior = pool_copy(req, r->element[3 * i + 1]);
        w->written = w->prior ? pool_copy(req, r->element[3 * i]) : NULL;
    }
}

static void on_add(void *data, int status, redisReply *r)
{
    add_call *c = data;
    /* A script's error (a slot on the move) did not add: as unavailable, so nothing is written. */
    if (status == STORE_OK && (!r || r->type == REDIS_REPLY_ERROR))
        status = STORE_UNAVAILABLE;
    if (status == STORE_OK)
        record_added(c, r);
    add_answered(c->s, status);
}

/* Sends one call's script with a call context of its own; false when out of memory. */
static add_call *add_call_new(add_state *s, size_t at, size_t n)
{
    add_call *c = arena_alloc(&s->req->pool, sizeof *c);
    if (c) {
        *c = (add_call){s, at, n};
        s->pending++;
    }
    return c;
}

void findindex_add(request *req, const char *id, const char (*addrs)[43], size_t n,
                   const char *roles, int64_t created_ms, const char *name, size_t name_len,
                   findindex_added *added, findindex_done done)
{
    add_state *s = arena_alloc(&req->pool, sizeof *s);
    if (!s) {
        done(req, STORE_UNAVAILABLE);
        return;
    }
    *s = (add_state){req, done, 1, STORE_OK, added}; /* 1: held until every add is sent */
    store *st = req->app->store;
    size_t idlen = strlen(id);
    char created[BUF_INT_SIZE] = "";
    if (created_ms > 0) /* a creation: its owners since then, as the backfill tells it */
        buf_format_int(created, created_ms);
    bool wallets = roles && *roles && n;
    /* The request's mark in each meta entry it writes: an undo takes back only those. */
    char *mark = arena_alloc(&req->pool, 17);
    uint8_t rnd[8];
    if (mark && getrandom(rnd, sizeof rnd, 0) == (ssize_t)sizeof rnd)
        hex_encode(rnd, sizeof rnd, mark);
    else if (mark)
        mark[0] = '\0';
    if (added) {
        *added = (findindex_added){.id = id};
        added->w = wallets ? arena_alloc(&req->pool, n * sizeof *added->w) : NULL;
        if (wallets && !added->w) {
            s->status = STORE_UNAVAILABLE;
            add_answered(s, STORE_OK);
            return;
        }
        added->n = wallets ? n : 0;
        for (size_t i = 0; i < added->n; i++)
            added->w[i] = (findindex_undo_wallet){.written = NULL};
        for (size_t i = 0; i < added->n; i++)
            memcpy(added->w[i].addr, addrs[i], 43);
    }
    if (wallets) {
        /* One script per wallet in cluster mode (each wallet's keys in their own slot); one
         * per INDEXES_WALLETS_PER_CALL otherwise. */
        size_t per = store_cluster_mode(st) ? 1 : INDEXES_WALLETS_PER_CALL;
        indexes_wallet *w = arena_alloc(&req->pool, (n < per ? n : per) * sizeof *w);
        if (!w || !mark) {
            s->status = STORE_UNAVAILABLE;
            add_answered(s, STORE_OK);
            return;
        }
        for (size_t at = 0; at < n; at += per) {
            size_t m = n - at < per ? n - at : per;
            for (size_t i = 0; i < m; i++) {
                keys_wallet(&w[i].k, addrs[at + i]);
                w[i].id = id, w[i].roles = roles, w[i].since = created, w[i].mark = mark;
            }
            add_call *c = add_call_new(s, at, m);
            if (!c || indexes_send_wallets(st, w, m, on_add, c) != 0) {
                s->status = STORE_UNAVAILABLE;
                if (c)
                    add_answered(s, STORE_UNAVAILABLE);
            }
        }
    }
    char folded[INDEXES_NAME_MAX];
    size_t flen = name ? indexes_fold(name, name_len, folded) : 0;
    if (flen || created[0]) {
        if (added) {
            if (created[0])
                snprintf(added->dir_created, sizeof added->dir_created, "%016lld:%s",
                         (long long)created_ms, id);
            if (flen)
                snprintf(added->dir_name, sizeof added->dir_name, "%s\x01%s", folded, id);
        }
        const char *argv[] = {KEYS_DIR_META, KEYS_DIR_CREATED, KEYS_DIR_NAMES, id, created, folded};
        size_t lens[] = {strlen(KEYS_DIR_META),  strlen(KEYS_DIR_CREATED),
                         strlen(KEYS_DIR_NAMES), idlen,
                         strlen(created),        flen};
        add_call *c = add_call_new(s, 0, 0);
        if (c)
            store_script(st, LUA_FIND_DIR_ADD, on_add, c, 3, 6, argv, lens);
        else
            s->status = STORE_UNAVAILABLE;
    }
    add_answered(s, STORE_OK);
}

static void on_undone(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    add_answered(data, STORE_OK);
}

/* Sends the undo of the wallets u[0..n) that have something to take back. */
static void send_wallet_undo(add_state *s, const char *id, const findindex_undo_wallet *u, size_t n)
{
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        nw += u[i].written != NULL;
    if (!nw)
        return;
    wallet_keys *k = malloc(nw * sizeof *k);
    const char **argv = malloc(nw * (KEYS_WALLET_N + 4) * sizeof *argv);
    size_t *lens = malloc(nw * (KEYS_WALLET_N + 4) * sizeof *lens);
    if (!k || !argv || !lens) { /* left as a refused write's junk: reads filter it */
        free(k);
        free(argv);
        free(lens);
        return;
    }
    size_t at = 0, kw = 0;
    for (size_t i = 0; i < n; i++)
        if (u[i].written) {
            keys_wallet(&k[kw], u[i].addr);
            for (size_t j = 0; j < KEYS_WALLET_N; j++)
                argv[at] = k[kw].key[j], lens[at++] = k[kw].len[j];
            kw++;
        }
    for (size_t i = 0; i < n; i++)
        if (u[i].written) {
            const char *a[4] = {id, u[i].written, u[i].prior, u[i].gained};
            for (size_t j = 0; j < 4; j++)
                argv[at] = a[j], lens[at++] = strlen(a[j]);
        }
    s->pending++;
    store_script(s->req->app->store, LUA_FIND_WALLET_UNDO, on_undone, s, (int)(nw * KEYS_WALLET_N),
                 (int)at, argv, lens);
    free(k);
    free(argv);
    free(lens);
}

void findindex_undo(request *req, const findindex_added *added, findindex_done done)
{
    add_state *s = arena_alloc(&req->pool, sizeof *s);
    if (!s || !added) {
        done(req, STORE_OK);
        return;
    }
    *s = (add_state){req, done, 1, STORE_OK, NULL};
    size_t per = store_cluster_mode(req->app->store) ? 1 : INDEXES_WALLETS_PER_CALL;
    for (size_t at = 0; at < added->n; at += per)
        send_wallet_undo(s, added->id, added->w + at, added->n - at < per ? added->n - at : per);
    if (added->dir_written) {
        const char *argv[] = {KEYS_DIR_META,      KEYS_DIR_CREATED,   KEYS_DIR_NAMES,
                              added->id,          added->dir_written, added->dir_prior,
                              added->dir_created, added->dir_name};
        size_t lens[8];
        for (size_t j = 0; j < 8; j++)
            lens[j] = strlen(argv[j]);
        s->pending++;
        store_script(req->app->store, LUA_FIND_DIR_UNDO, on_undone, s, 3, 8, argv, lens);
    }
    add_answered(s, STORE_OK);
}

/* The refusal kept across its undo. */
typedef struct refusal {
    char *err;
    size_t len;
} refusal;

static void on_refusal_undone(request *req, int status)
{
    (void)status;
    const refusal *f = req->state;
    redisReply e = {.type = REDIS_REPLY_ERROR, .str = f->err, .len = f->len};
    respond_store_failed(req, STORE_OK, &e);
}

void findindex_refuse(request *req, const findindex_added *added, const redisReply *err)
{
    refusal *f = arena_alloc(&req->pool, sizeof *f);
    char *copy = f ? arena_alloc(&req->pool, err->len + 1) : NULL;
    if (!copy) {
        respond_store_failed(req, STORE_OK, (redisReply *)err);
        return;
    }
    memcpy(copy, err->str, err->len);
    copy[err->len] = '\0';
    *f = (refusal){copy, err->len};
    /* The request's state is done with: the refusal is all that is left to answer. */
    req->state = f;
    findindex_undo(req, added, on_refusal_undone);
}
