/* findindex: adds before, drops after (findindex.h). */
#include "api/findindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

size_t findindex_fold(const char *name, size_t len, char out[FINDINDEX_NAME_MAX])
{
    while (len && (name[0] == ' ' || (name[0] >= '\t' && name[0] <= '\r'))) {
        name++;
        len--;
    }
    while (len && (name[len - 1] == ' ' || (name[len - 1] >= '\t' && name[len - 1] <= '\r')))
        len--;
    if (len > FINDINDEX_NAME_MAX - 1)
        len = FINDINDEX_NAME_MAX - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    out[len] = '\0';
    return len;
}

/* One findindex_add: answers counted down to the one call of done. */
typedef struct add_state {
    request *req;
    findindex_done done;
    size_t pending;
    int status;
} add_state;

static void add_answered(add_state *s, int status)
{
    if (status != STORE_OK && s->status == STORE_OK)
        s->status = status;
    if (--s->pending == 0)
        s->done(s->req, s->status);
}

static void on_add(void *data, int status, redisReply *r)
{
    add_state *s = data;
    /* A script's error (a slot on the move) did not add: as unavailable, so nothing is written. */
    if (status == STORE_OK && (!r || r->type == REDIS_REPLY_ERROR))
        status = STORE_UNAVAILABLE;
    add_answered(s, status);
}

void findindex_add(request *req, const char *id, const char (*addrs)[43], size_t n,
                   const char *roles, int64_t created_ms, const char *name, size_t name_len,
                   findindex_done done)
{
    add_state *s = arena_alloc(&req->pool, sizeof *s);
    if (!s) {
        done(req, STORE_UNAVAILABLE);
        return;
    }
    *s = (add_state){req, done, 1, STORE_OK}; /* 1: held until every add is sent */
    store *st = req->app->store;
    size_t idlen = strlen(id);
    char created[BUF_INT_SIZE] = "";
    if (created_ms > 0) /* a creation: its owners since then, as the backfill tells it */
        buf_format_int(created, created_ms);
    if (roles && *roles && n) {
        /* One script per wallet in cluster mode (each wallet's keys in their own slot); one
         * per FINDINDEX_WALLETS_PER_CALL otherwise. */
        size_t per = store_cluster_mode(st) ? 1 : FINDINDEX_WALLETS_PER_CALL;
        findindex_wallet *w = arena_alloc(&req->pool, (n < per ? n : per) * sizeof *w);
        if (!w) {
            s->status = STORE_UNAVAILABLE;
            add_answered(s, STORE_OK);
            return;
        }
        for (size_t at = 0; at < n; at += per) {
            size_t m = n - at < per ? n - at : per;
            for (size_t i = 0; i < m; i++) {
                keys_wallet(&w[i].k, addrs[at + i]);
                w[i].id = id, w[i].roles = roles, w[i].since = created;
            }
            s->pending++;
            if (findindex_send_wallets(st, w, m, on_add, s) != 0)
                add_answered(s, STORE_UNAVAILABLE);
        }
    }
    char folded[FINDINDEX_NAME_MAX];
    size_t flen = name ? findindex_fold(name, name_len, folded) : 0;
    if (flen || created[0]) {
        const char *argv[] = {KEYS_DIR_META, KEYS_DIR_CREATED, KEYS_DIR_NAMES, id, created, folded};
        size_t lens[] = {strlen(KEYS_DIR_META),  strlen(KEYS_DIR_CREATED),
                         strlen(KEYS_DIR_NAMES), idlen,
                         strlen(created),        flen};
        s->pending++;
        store_script(st, LUA_FIND_DIR_ADD, on_add, s, 3, 6, argv, lens);
    }
    add_answered(s, STORE_OK);
}

int findindex_send_wallets(store *st, const findindex_wallet *w, size_t n, store_cb cb, void *data)
{
    size_t argc = n * (KEYS_WALLET_N + 3);
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    if (!argv || !lens) {
        free(argv);
        free(lens);
        return -1;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < KEYS_WALLET_N; j++) {
            argv[at] = w[i].k.key[j];
            lens[at++] = w[i].k.len[j];
        }
    for (size_t i = 0; i < n; i++) {
        const char *a[3] = {w[i].id, w[i].roles, w[i].since};
        for (size_t j = 0; j < 3; j++) {
            argv[at] = a[j];
            lens[at++] = strlen(a[j]);
        }
    }
    store_script(st, LUA_FIND_WALLET_ADD, cb, data, (int)(n * KEYS_WALLET_N), (int)argc, argv,
                 lens);
    free(argv);
    free(lens);
    return 0;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

void findindex_send_drops(struct app *a, const wallet_keys *k, const char *const *args,
                          const size_t *lens, size_t n)
{
    char grace[BUF_INT_SIZE];
    buf_format_int(grace, a->cfg.find_repair_grace_ms);
    size_t argc = 1 + KEYS_WALLET_N + n;
    const char **argv = malloc(argc * sizeof *argv);
    size_t *alens = malloc(argc * sizeof *alens);
    if (!argv || !alens) { /* a drop not sent is left to a read's repair */
        free(argv);
        free(alens);
        return;
    }
    size_t at = 0; /* the shared grace, then the call's own keys and arguments */
    argv[at] = grace, alens[at++] = strlen(grace);
    for (size_t j = 0; j < KEYS_WALLET_N; j++)
        argv[at] = k->key[j], alens[at++] = k->len[j];
    for (size_t j = 0; j < n; j++)
        argv[at] = args[j], alens[at++] = lens[j];
    if (store_cluster_mode(a->store))
        group_script_alone(a->groups, LUA_FIND_WALLET_DROP, on_ignored, NULL, 0, 1, KEYS_WALLET_N,
                           (int)at, argv, alens);
    else
        group_script(a->groups, LUA_FIND_WALLET_DROP, on_ignored, NULL, 0, 1, KEYS_WALLET_N,
                     (int)at, argv, alens);
    free(argv);
    free(alens);
}

void findindex_drop_roles(struct app *a, const char *id, const char (*addrs)[43], size_t n,
                          const char *roles, bool all_roles)
{
    const char *args[4] = {id, "", roles ? roles : "", all_roles ? "1" : "0"};
    size_t lens[4];
    for (size_t j = 0; j < 4; j++)
        lens[j] = strlen(args[j]);
    for (size_t i = 0; i < n; i++) {
        wallet_keys k;
        keys_wallet(&k, addrs[i]);
        findindex_send_drops(a, &k, args, lens, 4);
    }
}

void findindex_drop_name(struct app *a, const char *id, const char *name, size_t len)
{
    char folded[FINDINDEX_NAME_MAX], entry[FINDINDEX_NAME_MAX + 48], grace[BUF_INT_SIZE];
    size_t flen = findindex_fold(name, len, folded);
    if (!flen)
        return;
    int elen = snprintf(entry, sizeof entry, "%s\x01%s", folded, id);
    if (elen < 0 || (size_t)elen >= sizeof entry)
        return;
    buf_format_int(grace, a->cfg.find_repair_grace_ms);
    const char *argv[] = {KEYS_DIR_META, KEYS_DIR_CREATED, KEYS_DIR_NAMES, grace, id, "", entry};
    size_t lens[7];
    for (size_t j = 0; j < 7; j++)
        lens[j] = j == 6 ? (size_t)elen : strlen(argv[j]);
    store_script(a->store, LUA_FIND_DIR_DROP, on_ignored, NULL, 3, 7, argv, lens);
}
