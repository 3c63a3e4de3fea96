/* indexes: the store's side of the find indexes of CONTRACT §9 (their rule: resources/findindex.h),
 * with no request behind it: names folded for the directory, wallets' adds sent in batches (by a
 * write's add-before, and by the backfill job), and the drops, fire and forget, once an entity
 * no longer holds what an entry says. */
#ifndef ENTITYD_INDEXES_H
#define ENTITYD_INDEXES_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/keys.h"
#include "redis/store.h"

struct app;

/* Role letters of the index scripts. */
#define INDEXES_OWNER  "o"
#define INDEXES_ADMIN  "a"
#define INDEXES_MEMBER "m"

/* Folded name of the directory's search: trimmed, ASCII lowercase. Returns its length (0 for
 * a blank name); out holds cap bytes, the name is cut there. */
#define INDEXES_NAME_MAX 512
size_t indexes_fold(const char *name, size_t len, char out[INDEXES_NAME_MAX]);

/* One wallet's index add: its keys, the entity, the role letters, since (ms as decimal, or
 * "" for Redis's now) and the request's mark (find_wallet_add.lua; NULL or "" none). */
typedef struct indexes_wallet {
    wallet_keys k;
    const char *id, *roles, *since, *mark;
} indexes_wallet;
/* Wallets that one script call adds outside Redis Cluster (one per call in it): as many as
 * one force-add names, so that a write sends one index call. */
#define INDEXES_WALLETS_PER_CALL 1000
/* Sends the adds of w[0..n) (n at most INDEXES_WALLETS_PER_CALL; 1 in cluster mode) as one
 * find_wallet_add.lua call; cb as store_script's. Returns -1 (cb not called) when out of
 * memory. */
int indexes_send_wallets(struct store *st, const indexes_wallet *w, size_t n, store_cb cb,
                         void *data);

/* Sends one wallet's drops (find_wallet_drop.lua), fire and forget: args[0..n) are its entries,
 * 4 arguments each (entity id, since, role letters, "1" to drop the entry altogether). Outside
 * Redis Cluster the drops of one loop turn leave as one call (redis/group.h): a removal of one
 * member each, 20 in a turn, then costs Redis one script call instead of 20. In it, each
 * wallet's keys are in a slot of their own: one call each. */
void indexes_send_drops(struct app *a, const wallet_keys *k, const char *const *args,
                        const size_t *lens, size_t n);
/* Remove-after, fire and forget, sent once the entity write that removed the roles is
 * answered: the n addresses no longer hold `roles` in entity `id`. With all_roles, they hold
 * none at all any more (a member removed who was no owner or admin, an entity deleted). */
void indexes_drop_roles(struct app *a, const char *id, const char (*addrs)[43], size_t n,
                        const char *roles, bool all_roles);
/* Remove-after of the directory's name entry of a name the entity no longer has. */
void indexes_drop_name(struct app *a, const char *id, const char *name, size_t len);

#endif
