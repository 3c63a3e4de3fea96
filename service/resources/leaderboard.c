/* leaderboard: GET /api/entities/{id}/leaderboard (CONTRACT §5), a page of one board, through
 * the read cache. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/reads.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/log.h"
#include "redis/keys.h"
#include "api/respond.h"
#include "redis/store.h"
#include "cache/readcache.h"
#include "jobs/sweeper.h"

/* A board entry (keys.h): "<9999999999999999 - value, 16 digits>:<address>". */
#define BOARD_ENTRY_LEN 59

/* A page is plain commands in one transaction, no script: the board entries carry their values
 * (keys.h), decoded here. The page's first rank comes from the cursor (the entry the last page
 * ended with): the live entries up to it, and those with a higher value than its own.
 * A removed member's entries stay on the boards until the sweeper takes them off (jobs/sweeper.h).
 * On the XP board they are tombstoned in its gone zset: every count subtracts the same count of
 * the gone zset, and the page skips the gone entries, read in the same transaction over the same
 * range (the first `limit + 1` of them after the start cover every one among the page's
 * `limit + 1` board entries: each is a board entry too). Earlier versions tombstoned skill
 * boards' entries so too, and those are read the same way. On a skill board a removal
 * tombstones nothing (an ordered insert per skill was most of a removal's cost): the member
 * joins the entity's unswept set, and while that set is not empty the page's addresses are
 * checked against the members hash in a second round trip, non-members skipped. Nothing
 * counts those above a cursor, so a skill board's cursor carries the counts of the page that
 * issued it: a walk's ranks are numbered from its first page, which is read from the top.
 * When skipping leaves the page short while the board goes on, further reads follow from the
 * last entry seen, BOARD_MORE at a time, at most BOARD_MORE_ROUNDS of them; past that the page
 * is answered short, its cursor the last entry seen (a cursor need not be a live entry: ranks
 * after it count live entries only). */
#define BOARD_MORE        1000
#define BOARD_MORE_ROUNDS 4

typedef struct board_req {
    char id[IDS_SIZE];
    char by[IDS_SIZE]; /* "xp" or a skill id */
    char cursor[BOARD_ENTRY_LEN + 1];
    long limit;
    char (*kept)[BOARD_ENTRY_LEN]; /* the page's live entries read so far, up to limit + 1 */
    size_t nkept;
    size_t checked;         /* kept entries whose address the members hash confirmed (filter) */
    long long higher, upto; /* with a cursor: live values above its own; live entries up to it */
    bool carried;           /* those came with the cursor (a skill board's) */
    bool filter;            /* a skill board while the entity has unswept removed members */
    bool rebuilding;        /* a skill board being rebuilt after a move (CONTRACT section 15) */
    char last[BOARD_ENTRY_LEN + 1]; /* the last board entry read */
    bool more;                      /* the board may go on after it */
    int rounds;
    size_t skipped; /* malformed entries */
} board_req;

static bool valid_board_entry(const char *s, size_t len)
{
    return len == BOARD_ENTRY_LEN && reads_all_digits(s, 16) && s[16] == ':' && s[17] == '0' &&
           s[18] == 'x' && reads_lower_hex(s + 19, 40);
}

/* A page's cursor is the entry it ended with, written compactly: the entry's 16 digits, then
 * its address's 40 hex digits, with nothing to decode (the hex of the whole entry, twice as
 * long, was a good part of a deep page's cost: parsed, decoded and hashed on every read). A
 * skill board's cursor then carries the page's counts, BOARD_COUNT_DIGITS digits each: the live
 * entries up to its entry, and those above its value. */
#define BOARD_CURSOR_LEN   56
#define BOARD_COUNT_DIGITS 12
#define BOARD_COUNTED_LEN  (BOARD_CURSOR_LEN + 2 * BOARD_COUNT_DIGITS)

static bool board_count(const char *s, long long *out)
{
    if (!reads_all_digits(s, BOARD_COUNT_DIGITS))
        return false;
    long long v = 0;
    for (int i = 0; i < BOARD_COUNT_DIGITS; i++)
        v = v * 10 + (s[i] - '0');
    *out = v;
    return true;
}

/* Reads the optional `cursor` into the board entry it names (NUL-ended; "" when absent) and, for
 * a skill board's cursor with counts, those into q (carried), or answers 400 and returns false.
 * The hex of a whole entry, which earlier releases issued, is taken too, and on the XP board a
 * cursor's counts are not needed (its counts are read). */
static bool board_cursor(request *req, board_req *q)
{
    char *out = q->cursor;
    size_t len;
    const char *cp = request_param(req, "cursor", &len);
    out[0] = '\0';
    q->carried = false;
    if (!cp || !len)
        return true;
    bool ok = true;
    if (len == BOARD_CURSOR_LEN || len == BOARD_COUNTED_LEN) {
        memcpy(out, cp, 16);
        memcpy(out + 16, ":0x", 3);
        memcpy(out + 19, cp + 16, 40);
        if (len == BOARD_COUNTED_LEN && strcmp(q->by, "xp") != 0) {
            ok = board_count(cp + BOARD_CURSOR_LEN, &q->upto) &&
                 board_count(cp + BOARD_CURSOR_LEN + BOARD_COUNT_DIGITS, &q->higher) &&
                 q->higher <= q->upto;
            q->carried = ok;
        }
    } else {
        ok =
            len == 2 * BOARD_ENTRY_LEN && hex_decode(cp, len, (uint8_t *)out, BOARD_ENTRY_LEN) == 0;
    }
    if (!ok || !valid_board_entry(out, BOARD_ENTRY_LEN)) {
        out[0] = '\0';
        q->carried = false;
        request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
        return false;
    }
    out[BOARD_ENTRY_LEN] = '\0';
    return true;
}

static void append_count(buf *b, long long v)
{
    char d[BOARD_COUNT_DIGITS];
    if (v < 0)
        v = 0;
    if (v > 999999999999LL) /* BOARD_COUNT_DIGITS nines: past any entity's members */
        v = 999999999999LL;
    for (int i = BOARD_COUNT_DIGITS - 1; i >= 0; i--, v /= 10)
        d[i] = (char)('0' + v % 10);
    buf_append(b, d, BOARD_COUNT_DIGITS);
}

/* Appends the nextCursor member for a page that ended with the entry `next`, or null (NULL);
 * counted: a skill board's, with the counts at `next` (upto, higher). */
static void append_board_cursor(buf *b, const char *next, bool counted, long long upto,
                                long long higher)
{
    if (!next) {
        buf_append_str(b, ",\"nextCursor\":null}");
        return;
    }
    buf_append_str(b, ",\"nextCursor\":\"");
    buf_append(b, next, 16);
    buf_append(b, next + 19, 40);
    if (counted) {
        append_count(b, upto);
        append_count(b, higher);
    }
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
 * range: keeps the live entries, up to limit + 1, and notes the last entry looked at; once
 * limit + 1 are kept it stops there (the members check may drop some of them: the next read
 * then starts after the last entry looked at). Counts the malformed entries skipped. */
static void board_collect(board_req *q, const redisReply *page, const redisReply *gone,
                          size_t fetched)
{
    size_t g = 0;
    q->more = page->elements >= fetched;
    for (size_t i = 0; i < page->elements; i++) {
        const redisReply *e = page->element[i];
        if (q->nkept > (size_t)q->limit) {
            q->more = true;
            break;
        }
        if (e->type != REDIS_REPLY_STRING || !valid_board_entry(e->str, e->len)) {
            q->skipped++;
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
        memcpy(q->kept[q->nkept++], e->str, BOARD_ENTRY_LEN);
    }
    q->more = q->more && q->last[0]; /* read on only after an entry */
}

/* Renders the page from the entries kept (ranks from the cursor's counts) and answers. `r`: the
 * one reply the page came from, whose rendering the read cache may keep, or NULL. */
static void board_answer(request *req, const redisReply *r)
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
    if (q->skipped) {
        buf *line = log_begin(LOG_WARN, "leaderboard page: malformed entries");
        if (line) {
            log_int(line, "skipped", (int64_t)q->skipped);
            log_end(line);
        }
    }
    buf_append(b, "]", 1);
    const char *next = q->nkept > (size_t)q->limit ? q->kept[q->limit - 1]
                       : q->more && q->last[0]     ? q->last
                                                   : NULL;
    /* The counts at next: every entry shown is live and up to it; the live entries above its
     * value are those before the value group it shares with the last one shown (or with the
     * cursor), else all of them. */
    long long upto = q->upto + (long long)shown;
    long long higher = prev && next && memcmp(prev, next, 16) == 0 ? rank - 1 : upto;
    if (q->rebuilding)
        buf_append_str(b, ",\"rebuilding\":true");
    append_board_cursor(b, next, strcmp(q->by, "xp") != 0, upto, higher);
    if (r)
        readcache_keep_rendered(req->app->reads, r, INT64_MAX, b->data, b->len);
    respond_send(req, 200, b);
}

static void board_read_more(request *req);
static void board_check_members(request *req);

/* What follows a read of the board: the members check of the entries kept since the last one,
 * a further read while the page is short and the board goes on, or the answer (`r` as for
 * board_answer). */
static void board_next(request *req, const redisReply *r)
{
    board_req *q = req->state;
    if (q->filter && q->checked < q->nkept) {
        board_check_members(req);
        return;
    }
    if (q->nkept <= (size_t)q->limit && q->more && q->rounds < BOARD_MORE_ROUNDS) {
        q->rounds++;
        board_read_more(req); /* removed members' entries made the page short */
        return;
    }
    board_answer(req, r);
}

/* HMGET members of the addresses kept since the last check: the non-members go (a removed
 * member's entries on a skill board, not swept yet). */
static void on_board_members(void *data, int status, redisReply *r)
{
    request *req = data;
    board_req *q = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != q->nkept - q->checked) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    size_t n = q->checked;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type == REDIS_REPLY_NIL)
            continue;
        if (n != q->checked + i)
            memcpy(q->kept[n], q->kept[q->checked + i], BOARD_ENTRY_LEN);
        n++;
    }
    q->nkept = q->checked = n;
    board_next(req, NULL);
}

static void board_check_members(request *req)
{
    board_req *q = req->state;
    entity_keys k;
    keys_entity(&k, q->id);
    size_t n = q->nkept - q->checked;
    const char **argv = arena_alloc(&req->pool, (n + 2) * sizeof *argv);
    size_t *lens = arena_alloc(&req->pool, (n + 2) * sizeof *lens);
    if (!argv || !lens) {
        request_fail_internal(req, "out of memory");
        return;
    }
    argv[0] = "HMGET";
    lens[0] = 5;
    argv[1] = k.members;
    lens[1] = k.members_len;
    for (size_t i = 0; i < n; i++) {
        argv[2 + i] = q->kept[q->checked + i] + 17; /* the address */
        lens[2 + i] = 42;
    }
    store_command(req->app->store, on_board_members, req, (int)(n + 2), argv, lens);
}

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
    board_collect(q, r->element[0], r->element[1], BOARD_MORE);
    board_next(req, NULL);
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
    bool by_skill = strcmp(q->by, "xp") != 0, counts = q->cursor[0] && !q->carried;
    /* {HMGET id isEnabled public, the role lookups, (by a skill) HEXISTS skills by, SCARD of
     * the unswept set and SISMEMBER of the boards being rebuilt, ZRANGEBYLEX of the board, the same
     * of its gone zset, and with a cursor whose counts are not carried ZLEXCOUNT up to its value
     * and up to it, of the board, then of the gone zset} */
    size_t at = 1 + ENTITY_ROLE_CMDS, n = at + (by_skill ? 3 : 0) + 2 + (counts ? 4 : 0);
    /* r: the transaction's reply (the read cache's entry); g: the gate's answer in it */
    const redisReply *g = entity_gate_reply(req, status, r);
    if (!g || reads_reply(req, STORE_OK, g, n, 3, false) != ENTITY_READ_OK)
        return;
    q->filter = false;
    if (by_skill) {
        const redisReply *has = g->element[at++], *unswept = g->element[at++],
                         *rebuilding = g->element[at++];
        if (has->type != REDIS_REPLY_INTEGER || !has->integer) {
            request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
            return;
        }
        if (unswept->type != REDIS_REPLY_INTEGER || rebuilding->type != REDIS_REPLY_INTEGER) {
            request_fail_internal(req, "leaderboard: unexpected reply");
            return;
        }
        q->filter = unswept->integer > 0;
        q->rebuilding = rebuilding->integer == 1;
        /* a crash between a move and its listing would leave the rebuild unfound: listed now */
        if (q->filter || q->rebuilding)
            sweeper_note_waiting(req->app->sweeper, q->id);
    }
    size_t kept_len;
    const char *kept = readcache_rendered(req->app->reads, r, 0, &kept_len);
    if (kept) {
        slice part = {kept, kept_len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    const redisReply *page = g->element[at], *gone = g->element[at + 1];
    bool ints = true;
    for (size_t i = 0; counts && i < 4; i++)
        ints = ints && g->element[at + 2 + i]->type == REDIS_REPLY_INTEGER;
    if (page->type != REDIS_REPLY_ARRAY || gone->type != REDIS_REPLY_ARRAY || !ints) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    if (counts) {
        q->higher = g->element[at + 2]->integer - g->element[at + 4]->integer;
        q->upto = g->element[at + 3]->integer - g->element[at + 5]->integer;
    } else if (!q->carried) {
        q->higher = q->upto = 0;
    }
    q->nkept = q->checked = q->skipped = 0;
    q->rounds = 0;
    q->last[0] = '\0';
    board_collect(q, page, gone, (size_t)q->limit + 1);
    board_next(req, r);
}

static void board_send(request *req)
{
    board_req *q = req->state;
    entity_keys k;
    keys_entity(&k, q->id);
    char board[KEYS_BOARD_SIZE], start[BOARD_ENTRY_LEN + 2], tie[19], upto[BOARD_ENTRY_LEN + 2],
        lim[24], unswept[KEYS_ENTITY_SIZE], rebuild[KEYS_ENTITY_SIZE];
    size_t blen = keys_board(board, q->id, q->by), bylen = strlen(q->by);
    size_t ulen = keys_unswept(unswept, q->id), rblen = keys_board_rebuild(rebuild, q->id);
    bool cursor = q->cursor[0] != '\0', counts = cursor && !q->carried;
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
    const char *card[] = {"SCARD", unswept};
    size_t cardlens[] = {5, ulen};
    const char *rebuilt[] = {"SISMEMBER", rebuild, q->by};
    size_t rebuiltlens[] = {9, rblen, bylen};
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
    store_cmd cmds[10];
    int n = 0;
    if (strcmp(q->by, "xp") != 0) {
        cmds[n++] = (store_cmd){3, has, hlens};
        cmds[n++] = (store_cmd){2, card, cardlens};
        cmds[n++] = (store_cmd){3, rebuilt, rebuiltlens};
    }
    cmds[n++] = (store_cmd){7, range, rlens};
    cmds[n++] = (store_cmd){7, grange, grlens};
    if (counts) {
        cmds[n++] = (store_cmd){4, c1, c1lens};
        cmds[n++] = (store_cmd){4, c2, c2lens};
        cmds[n++] = (store_cmd){4, g1, g1lens};
        cmds[n++] = (store_cmd){4, g2, g2lens};
    }
    /* Gated (entity.h): a caller who may not read the board costs Redis the role lookups. */
    entity_gate gate;
    store_cmd cmd;
    entity_gate_init(&gate, req, &k, 'r', 3, fields + 2, flens + 2);
    for (int i = 0; i < n; i++)
        entity_gate_add(&gate, &cmds[i]);
    if (!entity_gate_cmd(&gate, req, &cmd))
        return;
    reads_desc d = {1, {'B'}};
    reads_desc_add(&d, q->id, strlen(q->id));
    reads_desc_add(&d, q->by, bylen);
    reads_desc_add(&d, lim, ln);
    reads_desc_add(&d, q->cursor, cursor ? BOARD_ENTRY_LEN : 0);
    reads_desc_add(&d, req->caller, strlen(req->caller));
    if (q->carried) {
        /* the rendering depends on them */
        char c[2 * 21];
        int clen = snprintf(c, sizeof c, "%lld.%lld", q->upto, q->higher);
        reads_desc_add(&d, c, (size_t)clen);
    }
    store_read_exec_as(req->app->store, request_read_flags(req), d.s, d.len, on_board, req, 1,
                       &cmd);
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
    q->higher = q->upto = 0;
    if (!reads_limit(req, 100, 20, &q->limit) || !board_cursor(req, q))
        return;
    q->kept = kept;
    req->state = q;
    board_send(req);
}
