/* findindex: the wallet and directory indexes of CONTRACT §9, kept across slots.
 *
 * A wallet's list and the directory live in other slots than the entities they name, so an
 * entity's script cannot write them. The rule (docs/DECISIONS.md, "Indexes across slots"):
 * an entry is added BEFORE the entity write that makes it true is sent (findindex_add, whose
 * failure answers the request before anything is written), and removed only AFTER the entity
 * no longer holds it (the drops of jobs/indexes.h, and every read's repair). Every read checks its
 * page against the entities themselves, so a drop that never happens (a crash, a route without the
 * hook) is never shown: the drops keep the indexes small, the adds keep the lists complete.
 * An add comes after the caller's right is checked (entity_check), for the addresses that gain
 * a role only, and a write its script refuses takes its adds back before answering
 * (findindex_undo; docs/DECISIONS.md, "A refused write leaves no trace"). */
#ifndef ENTITYD_FINDINDEX_H
#define ENTITYD_FINDINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ids.h"
#include "http/request.h"
#include "jobs/indexes.h"
#include "redis/keys.h"
#include "redis/store.h"

/* Runs when every add of a findindex_add is answered: STORE_OK, or the first failure (the
 * request must then be answered with it, and the entity write not sent). */
typedef void (*findindex_done)(request *req, int status);

/* What one wallet's add wrote (find_wallet_add.lua's answer): its meta entry, the one before
 * ("" none) and the lists that gained the entry; written is NULL while unknown. */
typedef struct findindex_undo_wallet {
    char addr[43];
    const char *written, *prior;
    char gained[5];
} findindex_undo_wallet;
/* What one findindex_add wrote, kept by the caller (in the request's pool), so that a write
 * refused after it can take it back (findindex_undo). */
typedef struct findindex_added {
    const char *id;
    findindex_undo_wallet *w;
    size_t n;
    const char *dir_written, *dir_prior; /* NULL: the directory was not written */
    char dir_created[IDS_SIZE + 20];     /* the entries that were new, or "" */
    char dir_name[INDEXES_NAME_MAX + IDS_SIZE + 2];
} findindex_added;

/* Add-before: each of the n addresses takes `roles` (letters above; NULL or "" none) in entity
 * `id`; with created_ms > 0 or a name, the directory gets the entity's created entry and its
 * name's entry. One script per wallet and one for the directory, all sent at once; done runs
 * once, after the last answer (perhaps before this returns). With `added`, what was written is
 * recorded there for findindex_undo (it must live as long as the request). */
void findindex_add(request *req, const char *id, const char (*addrs)[43], size_t n,
                   const char *roles, int64_t created_ms, const char *name, size_t name_len,
                   findindex_added *added, findindex_done done);
/* Undo of an add whose entity write was refused for sure (Redis's error answer; CONTRACT §12):
 * takes back what `added` records, but only entries still as this request wrote them, and
 * never what was there before it (find_wallet_undo.lua, find_dir_undo.lua). done runs once
 * every undo is answered, with STORE_OK whatever their outcome: the refusal is the answer. */
void findindex_undo(request *req, const findindex_added *added, findindex_done done);

/* Answers a write refused by its script (err, Redis's error answer) once findindex_undo has
 * taken back what `added` records: nothing the refused write wrote ahead outlives its answer. */
void findindex_refuse(request *req, const findindex_added *added, const redisReply *err);

#endif
