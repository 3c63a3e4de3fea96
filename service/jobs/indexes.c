/* indexes: the store's side of the find indexes (indexes.h). */
#include "jobs/indexes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

size_t indexes_fold(const char *name, size_t len, char out[INDEXES_NAME_MAX])
{
    while (len && (name[0] == ' ' || (name[0] >= '\t' && name[0] <= '\r'))) {
        name++;
        len--;
    }
    while (len && (name[len - 1] == ' ' || (name[len - 1] >= '\t' && name[len - 1] <= '\r')))
        len--;
    if (len > INDEXES_NAME_MAX - 1)
        len = INDEXES_NAME_MAX - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    out[len] = '\0';
    return len;
}

int indexes_send_wallets(store *st, const indexes_wallet *w, size_t n, store_cb cb, void *data)
{
    size_t argc = n * (KEYS_WALLET_N + 4);
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
        const char *a[4] = {w[i].id, w[i].roles, w[i].since, w[i].mark ? w[i].mark : ""};
        for (size_t j = 0; j < 4; j++) {
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

void indexes_send_drops(struct app *a, const wallet_keys *k, const char *const *args,
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

void indexes_drop_roles(struct app *a, const char *id, const char (*addrs)[43], size_t n,
                        const char *roles, bool all_roles)
{
    const char *args[4] = {id, "", roles ? roles : "", all_roles ? "1" : "0"};
    size_t lens[4];
    for (size_t j = 0; j < 4; j++)
        lens[j] = strlen(args[j]);
    for (size_t i = 0; i < n; i++) {
        wallet_keys k;
        keys_wallet(&k, addrs[i]);
        indexes_send_drops(a, &k, args, lens, 4);
    }
}

void indexes_drop_name(struct app *a, const char *id, const char *name, size_t len)
{
    char folded[INDEXES_NAME_MAX], entry[INDEXES_NAME_MAX + 48], grace[BUF_INT_SIZE];
    size_t flen = indexes_fold(name, len, folded);
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
