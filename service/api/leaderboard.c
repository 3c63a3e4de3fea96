/* leaderboard: GET /api/entities/{id}/leaderboard (CONTRACT §5), a page of one board, through
 * the read cache. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "auth/auth.h"
#include "api/entity.h"
#include "api/handlers.h"
#include "api/reads.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/log.h"
#include "redis/keys.h"
#include "api/respond.h"
#include "redis/store.h"
#include "cache/readcache.h"

/* A board entry (keys.h): "<9999999999999999 - value, 16 digits>:<address>". */
#define BOARD_ENTRY_LEN 59

/* A page is plain commands in one transaction, no script: the board entries carry their values
 * (keys.h), decoded here. The page's first rank comes from the cursor alone (the entry the last
 * page ended with): entries up to it, and entries with a higher value than its own.
 * A removed member's entries stay on the board until the sweeper takes them off (jobs/sweeper.h),
 * tombstoned in the board's gone zset: every count subtracts the same count of the gone zset,
 * and the page skips the gone entries, read in the same transaction over the same range (the
 * first `limit + 1` of them after the start cover every one among the page's `limit + 1` board
 * entries: each is a board entry too). When skipping leaves the page short while the board goes
 * on, further reads follow from the last entry seen, BOARD_MORE at a time, at most
 * BOARD_MORE_ROUNDS of them; past that the page is answered short, its cursor the last entry
 * seen (a cursor need not be a live entry: ranks after it count live entries only). */
#define BOARD_MORE        1000
#define BOARD_MORE_ROUNDS 4

typedef struct board_req {
    char id[IDS_SIZE];
    char by[IDS_SIZE]; /* "xp" or a skill id */
    char cursor[BOARD_ENTRY_LEN + 1];
    long limit;
    char (*kept)[BOARD_ENTRY_LEN]; /* the page's live entries read so far, up to limit + 1 */
    size_t nkept;
    long long higher, upto; /* with a cursor: live values above its own; live entries up to it */
    char last[BOARD_ENTRY_LEN + 1]; /* the last board entry read */
    bool more;                      /* the board may go on after it */
    int rounds;
} board_req;

static bool valid_board_entry(const char *s, size_t len)
{
    return len == BOARD_ENTRY_LEN && reads_all_digits(s, 16) && s[16] == ':' && s[17] == '0' &&
           s[18] == 'x' && reads_lower_hex(s + 19, 40);
}

/* A page's cursor is the entry it ended with, written compactly: the entry's 16 digits, then
 * its address's 40 hex digits, with nothing to decode (the hex of the whole entry, twice as
 * long, was a good part of a deep page's cost: parsed, decoded and hashed on every read). */
#define BOARD_CURSOR_LEN 56

/* Reads the optional `cursor` into the board entry it names (NUL-ended; "" when absent), or
 * answers 400 and returns false. The hex of a whole entry, which earlier releases issued, is
 * taken too. */
static bool board_cursor(request *req, char out[BOARD_ENTRY_LEN + 1])
{
    size_t len;
    const char *cp = request_param(req, "cursor", &len);
    out[0] = '\0';
    if (!cp || !len)
        return true;
    bool ok = true;
    if (len == BOARD_CURSOR_LEN) {
        memcpy(out, cp, 16);
        memcpy(out + 16, ":0x", 3);
        memcpy(out + 19, cp + 16, 40);
    } else {
        ok =
            len == 2 * BOARD_ENTRY_LEN && hex_decode(cp, len, (uint8_t *)out, BOARD_ENTRY_LEN) == 0;
    }
    if (!ok || !valid_board_entry(out, BOARD_ENTRY_LEN)) {
        out[0] = '\0';
        request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
        return false;
    }
    out[BOARD_ENTRY_LEN] = '\0';
    return true;
}

/* Appends the nextCursor member for a page that ended with the entry `next`, or null (NULL). */
static void append_board_cursor(buf *b, const char *next)
{
    if (!next) {
        buf_append_str(b, ",\"nextCursor\":null}");
        return;
    }
    buf_append_str(b, ",\"nextCursor\":\"");
    buf_append(b, next, 16);
    buf_append(b, next + 19, 40);
    buf_append(b, "\"}", 2);
}

/* The value of a board entry: 9999999999999999 - its first 16 digits. */
static uint64_t board_value(const char *entry)
{
    uint64_t inv = 0;
    for (int i = 0; i < 16; i++)
        inv = inv * 10 + (uint64_t)(entry[i] - '0');
    return 9999999999999999ULL - inv;
}

/* Lexicographic order of two strings (Redis's for equal scores). */
static int lex_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* Takes a read of the board (`page`, `fetched` asked for) and of its gone zset over the same
 * range: keeps the live entries, up to limit + 1, and notes the last entry read. Returns the
 * malformed entries skipped. */
static size_t board_collect(board_req *q, const redisReply *page, const redisReply *gone,
                            size_t fetched)
{
    size_t g = 0, skipped = 0;
    for (size_t i = 0; i < page->elements; i++) {
        const redisReply *e = page->element[i];
        if (e->type != REDIS_REPLY_STRING || !valid_board_entry(e->str, e->len)) {
            skipped++;
            continue;
        }
        memcpy(q->last, e->str, BOARD_ENTRY_LEN);
        q->last[BOARD_ENTRY_LEN] = '\0';
        int c = 1; /* the first gone entry not below e, against e */
        while (g < gone->elements) {
            const redisReply *x = gone->element[g];
            c = x->type == REDIS_REPLY_STRING ? lex_cmp(x->str, x->len, e->str, e->len) : -1;
            if (c >= 0)
                break;
            g++;
        }
        if (g < gone->elements && c == 0) {
            g++;
            continue; /* a removed member's, not swept yet */
        }
        if (q->nkept <= (size_t)q->limit)
            memcpy(q->kept[q->nkept++], e->str, BOARD_ENTRY_LEN);
    }
    q->more = page->elements >= fetched && q->last[0]; /* read on only after an entry */
    return skipped;
}

/* Renders the page from the entries kept (ranks from the cursor's counts) and answers. `r`: the
 * one reply the page came from, whose rendering the read cache may keep, or NULL. */
static void board_answer(request *req, const redisReply *r, size_t skipped)
{
    board_req *q = req->state;
    size_t shown = q->nkept < (size_t)q->limit ? q->nkept : (size_t)q->limit;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    const char *prev = q->cursor[0] ? q->cursor : NULL;
    long long rank = 1 + q->higher;
    for (size_t i = 0; i < shown; i++) {
        const char *e = q->kept[i];
        /* Competition ranks: a new value ranks after every live entry before it. */
        if (!prev || memcmp(prev, e, 16) != 0)
            rank = q->upto + (long long)i + 1;
        prev = e;
        if (i)
            buf_append(b, ",", 1);
        buf_append_str(b, "{\"rank\":");
        reads_append_int(b, rank);
        buf_append_str(b, ",\"member\":\"");
        buf_append(b, e + 17, 42);
        buf_append_str(b, "\",\"value\":");
        buf_append_uint(b, (unsigned long long)board_value(e));
        buf_append(b, "}", 1);
    }
    if (skipped) {
        buf *line = log_begin(LOG_WARN, "leaderboard page: malformed entries");
        if (line) {
            log_int(line, "skipped", (int64_t)skipped);
            log_end(line);
        }
    }
    buf_append(b, "]", 1);
    const char *next = q->nkept > (size_t)q->limit ? q->kept[q->limit - 1]
                       : q->more && q->last[0]     ? q->last
                                                   : NULL;
    append_board_cursor(b, next);
    if (r)
        readcache_keep_rendered(req->app->reads, r, INT64_MAX, b->data, b->len);
    respond_send(req, 200, b);
}

static void board_read_more(request *req);

/* EXEC: {ZRANGEBYLEX board, ZRANGEBYLEX gone}, both from after the last entry read. */
static void on_board_more(void *data, int status, redisReply *r)
{
    request *req = data;
    board_req *q = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[1]->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    size_t skipped = board_collect(q, r->element[0], r->element[1], BOARD_MORE);
    if (q->nkept <= (size_t)q->limit && q->more && ++q->rounds < BOARD_MORE_ROUNDS) {
        board_read_more(req);
        return;
    }
    board_answer(req, NULL, skipped);
}

static void board_read_more(request *req)
{
    board_req *q = req->state;
    char board[KEYS_BOARD_SIZE], gone[KEYS_BOARD_SIZE], from[BOARD_ENTRY_LEN + 2], n[8];
    size_t blen = keys_board(board, q->id, q->by), glen = keys_board_gone(gone, q->id, q->by);
    from[0] = '(';
    memcpy(from + 1, q->last, BOARD_ENTRY_LEN + 1);
    int nlen = snprintf(n, sizeof n, "%d", BOARD_MORE);
    const char *range[] = {"ZRANGEBYLEX", board, from, "+", "LIMIT", "0", n};
    size_t rlens[] = {11, blen, BOARD_ENTRY_LEN + 1, 1, 5, 1, (size_t)nlen};
    const char *grange[] = {"ZRANGEBYLEX", gone, from, "+", "LIMIT", "0", n};
    size_t glens[] = {11, glen, BOARD_ENTRY_LEN + 1, 1, 5, 1, (size_t)nlen};
    store_cmd cmds[] = {{7, range, rlens}, {7, grange, glens}};
    store_exec(req->app->store, on_board_more, req, 2, cmds);
}

static void on_board(void *data, int status, redisReply *r)
{
    request *req = data;
    board_req *q = req->state;
    bool by_skill = strcmp(q->by, "xp") != 0, cursor = q->cursor[0] != '\0';
    /* {HMGET id isEnabled public, the role lookups, HEXISTS skills by (by a skill), ZRANGEBYLEX
     * of the board, the same of its gone zset, and with a cursor ZLEXCOUNT up to its value and
     * up to it, of the board, then of the gone zset} */
    size_t at = 1 + ENTITY_ROLE_CMDS, n = at + by_skill + 2 + (cursor ? 4 : 0);
    if (reads_reply(req, status, r, n, 3, false) != ENTITY_READ_OK)
        return;
    if (by_skill) {
        const redisReply *has = r->element[at++];
        if (has->type != REDIS_REPLY_INTEGER || !has->integer) {
            request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
            return;
        }
    }
    size_t kept_len;
    const char *kept = readcache_rendered(req->app->reads, r, 0, &kept_len);
    if (kept) {
        slice part = {kept, kept_len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    const redisReply *page = r->element[at], *gone = r->element[at + 1];
    bool counts = true;
    for (size_t i = 0; cursor && i < 4; i++)
        counts = counts && r->element[at + 2 + i]->type == REDIS_REPLY_INTEGER;
    if (page->type != REDIS_REPLY_ARRAY || gone->type != REDIS_REPLY_ARRAY || !counts) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    q->higher = q->upto = 0;
    if (cursor) {
        q->higher = r->element[at + 2]->integer - r->element[at + 4]->integer;
        q->upto = r->element[at + 3]->integer - r->element[at + 5]->integer;
    }
    q->nkept = 0;
    q->last[0] = '\0';
    size_t skipped = board_collect(q, page, gone, (size_t)q->limit + 1);
    if (q->nkept <= (size_t)q->limit && q->more) {
        q->rounds = 0;
        board_read_more(req); /* removed members' entries made the page short */
        return;
    }
    board_answer(req, r, skipped);
}

static void board_send(request *req)
{
    board_req *q = req->state;
    entity_keys k;
    keys_entity(&k, q->id);
    char board[KEYS_BOARD_SIZE], start[BOARD_ENTRY_LEN + 2], tie[19], upto[BOARD_ENTRY_LEN + 2],
        lim[24];
    size_t blen = keys_board(board, q->id, q->by), bylen = strlen(q->by);
    bool cursor = q->cursor[0] != '\0';
    /* Built by hand: printf is a good part of a cached page's cost. */
    start[0] = cursor ? '(' : '-';
    upto[0] = '[';
    memcpy(start + 1, q->cursor, BOARD_ENTRY_LEN + 1);
    memcpy(upto + 1, q->cursor, BOARD_ENTRY_LEN + 1);
    if (!cursor)
        start[1] = '\0';
    tie[0] = '(';
    memcpy(tie + 1, q->cursor, 16);
    tie[17] = ':';
    tie[18] = '\0';
    long l = q->limit + 1; /* 2 to 101 */
    size_t ln = 0;
    if (l >= 100)
        lim[ln++] = (char)('0' + l / 100);
    if (l >= 10)
        lim[ln++] = (char)('0' + l / 10 % 10);
    lim[ln++] = (char)('0' + l % 10);
    lim[ln] = '\0';
    const char *fields[] = {"HMGET", k.entity, "id", "isEnabled", "public"};
    size_t flens[] = {5, k.entity_len, 2, 9, 6};
    const char *has[] = {"HEXISTS", k.skills, q->by};
    size_t hlens[] = {7, k.skills_len, bylen};
    const char *range[] = {"ZRANGEBYLEX", board, start, "+", "LIMIT", "0", lim};
    size_t rlens[] = {11, blen, strlen(start), 1, 5, 1, strlen(lim)};
    const char *c1[] = {"ZLEXCOUNT", board, "-", tie};
    size_t c1lens[] = {9, blen, 1, strlen(tie)};
    const char *c2[] = {"ZLEXCOUNT", board, "-", upto};
    size_t c2lens[] = {9, blen, 1, strlen(upto)};
    char gone[KEYS_BOARD_SIZE];
    size_t glen = keys_board_gone(gone, q->id, q->by);
    const char *grange[] = {"ZRANGEBYLEX", gone, start, "+", "LIMIT", "0", lim};
    size_t grlens[] = {11, glen, strlen(start), 1, 5, 1, strlen(lim)};
    const char *g1[] = {"ZLEXCOUNT", gone, "-", tie};
    size_t g1lens[] = {9, glen, 1, strlen(tie)};
    const char *g2[] = {"ZLEXCOUNT", gone, "-", upto};
    size_t g2lens[] = {9, glen, 1, strlen(upto)};
    store_cmd cmds[1 + ENTITY_ROLE_CMDS + 8] = {{5, fields, flens}};
    int n = 1 + ENTITY_ROLE_CMDS;
    entity_role_lookup rl;
    entity_role_cmds(&rl, &k, req->caller, cmds + 1);
    if (strcmp(q->by, "xp") != 0)
        cmds[n++] = (store_cmd){3, has, hlens};
    cmds[n++] = (store_cmd){7, range, rlens};
    cmds[n++] = (store_cmd){7, grange, grlens};
    if (cursor) {
        cmds[n++] = (store_cmd){4, c1, c1lens};
        cmds[n++] = (store_cmd){4, c2, c2lens};
        cmds[n++] = (store_cmd){4, g1, g1lens};
        cmds[n++] = (store_cmd){4, g2, g2lens};
    }
    reads_desc d = {1, {'B'}};
    reads_desc_add(&d, q->id, strlen(q->id));
    reads_desc_add(&d, q->by, bylen);
    reads_desc_add(&d, lim, ln);
    reads_desc_add(&d, q->cursor, cursor ? BOARD_ENTRY_LEN : 0);
    reads_desc_add(&d, req->caller, strlen(req->caller));
    auth_store_exec_as(req, d.s, d.len, on_board, n, cmds);
}

void leaderboard_get(request *req)
{
    board_req *q = arena_alloc(&req->pool, sizeof *q);
    char(*kept)[BOARD_ENTRY_LEN] = arena_alloc(&req->pool, 101 * BOARD_ENTRY_LEN);
    if (!q || !kept) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, q->id))
        return;
    size_t len;
    const char *by = request_param(req, "by", &len);
    if (!by || !len) {
        memcpy(q->by, "xp", 3);
    } else if ((len == 2 && !memcmp(by, "xp", 2)) || ids_valid(by, len, 's')) {
        memcpy(q->by, by, len);
        q->by[len] = '\0';
    } else {
        request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
        return;
    }
    if (!reads_limit(req, 100, 20, &q->limit) || !board_cursor(req, q->cursor))
        return;
    q->kept = kept;
    req->state = q;
    board_send(req);
}
