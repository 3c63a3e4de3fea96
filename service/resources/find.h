/* find: what find.c (the pages: index reads, rounds, answers) and find_check.c (each entry
 * checked against its entity) share: a page request's state, its entries, and the three steps
 * each calls of the other. */
#ifndef ENTITYD_FIND_H
#define ENTITYD_FIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/findcache.h"
#include "cache/readcache.h"
#include "core/buf.h"
#include "core/ids.h"
#include "http/request.h"
#include "jobs/indexes.h"
#include "redis/keys.h"

enum list_kind { LIST_WALLET, LIST_CREATED, LIST_NAMES };
enum { HELD_OWNER = 1, HELD_ADMIN = 2, HELD_MEMBER = 4 };

/* Rounds of index reads one page may take past dropped entries; each reads twice as many. */
#define FIND_MAX_ROUNDS 8
#define ENTRY_MAX       (INDEXES_NAME_MAX + IDS_SIZE + 2)

/* One index entry of a round, and what its entity showed. */
typedef struct find_item {
    char *entry; /* NUL-terminated, in the request's arena */
    size_t entry_len;
    char id[IDS_SIZE];
    bool checked, exists, is_public, enabled;
    int held;
    size_t summary_at, summary_len; /* the EntitySummary without its closing brace, in rows */
    size_t folded_at, folded_len;   /* the entity's name, folded, in rows */
} find_item;

typedef struct find_req {
    request *req;
    int kind;
    char wallet[43];
    wallet_keys wk;
    const char *range_key;
    int role; /* HELD_* or 0: any */
    bool see_all;
    long limit, have;
    char q[INDEXES_NAME_MAX];
    size_t qlen;
    char cursor[ENTRY_MAX]; /* the entry the next round reads after; "" from the start */
    size_t cursor_len;
    int rounds;
    find_item *items;
    size_t nitems, pending;
    void (*checked)(struct find_req *f); /* find_send_checks' caller, once all are answered */
    bool failed;                         /* a check went unanswered: the page cannot be told */
    bool full; /* the round's read returned all it asked for: more may follow */
    buf out;
    buf rows; /* the summaries the checks rendered, each item's at its offset */
    /* the page cache: the page's key, and the marks of every key read while keep holds */
    bool keep;
    uint64_t gen;
    readcache_mark *marks;
    size_t nmarks, cap_marks;
    char *page_key;
    size_t page_key_len;
} find_req;

/* find_check.c, below find.c: it calls nothing of find.c's, and hands a checked round back
 * through the function find.c gives it. */

/* Marks a key about to be read, for the page cache; past FINDCACHE_MAX_MARKS the page is not
 * kept. */
void find_mark_key(find_req *f, const char *key, size_t len);
/* Checks every item of the round against its entity, then calls checked(f) once every check
 * is answered (find.c: the page answered, or the next round sent). */
void find_send_checks(find_req *f, void (*checked)(find_req *f));

#endif
