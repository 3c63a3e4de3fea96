/* find: a wallet's entities and the directory (CONTRACT §9), read from the indexes of
 * findindex.h and checked, entry by entry, against the entities themselves: an entry the
 * entity no longer bears out is left out of the page and dropped from its index (after the
 * grace period of its last add), and the page reads on past it, so that it is never short
 * while more entries exist.
 *
 * A page made is kept (cache/findcache.h) under everything it depends on (the route, the
 * normalized query, whether the caller sees every entity), with a mark of every key its reads
 * read, and given again while none of them has changed: a repeated page neither asks Redis nor
 * renders. A page that sent a repair is not kept: its entries were out of step with their
 * entities, and whether the repair may drop them depends on the time (the grace period). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "resources/find.h"
#include "resources/findindex.h"
#include "resources/handlers.h"
#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "cache/findcache.h"
#include "cache/readcache.h"
#include "core/app.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "crypto/hex.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

static void find_release(void *data)
{
    find_req *f = data;
    buf_free(&f->out);
    buf_free(&f->rows);
}

static void send_round(find_req *f);
static void process_round(find_req *f);

/* ---- the index reads ---- */

static bool entry_id(int kind, const char *e, size_t len, char id[IDS_SIZE])
{
    const char *p;
    size_t n;
    if (kind == LIST_NAMES) {
        const char *sep = memchr(e, '\x01', len);
        if (!sep)
            return false;
        p = sep + 1;
        n = len - (size_t)(p - e);
    } else {
        if (len < 18 || e[16] != ':')
            return false;
        for (int i = 0; i < 16; i++)
            if (e[i] < '0' || e[i] > '9')
                return false;
        p = e + 17;
        n = len - 17;
    }
    if (n >= IDS_SIZE || !ids_valid(p, n, 'c'))
        return false;
    memcpy(id, p, n);
    id[n] = '\0';
    return true;
}

/* Entries a round reads: what the page still needs and one more, twice as many each round
 * (past entries left out), at most FIND_MAX_READ. */
#define FIND_MAX_READ 1000
static long round_count(const find_req *f)
{
    long n = (f->limit - f->have + 1) << f->rounds;
    return n < FIND_MAX_READ ? n : FIND_MAX_READ;
}

static void on_range(void *data, int status, redisReply *r)
{
    find_req *f = data;
    if (respond_store_failed(f->req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(f->req, "find: unexpected index reply");
        return;
    }
    f->nitems = 0;
    f->items = r->elements ? arena_alloc(&f->req->pool, r->elements * sizeof *f->items) : NULL;
    if (r->elements && !f->items) {
        request_fail_internal(f->req, "out of memory");
        return;
    }
    long asked = round_count(f);
    f->full = (long)r->elements >= asked;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        find_item *it = &f->items[f->nitems];
        if (e->type != REDIS_REPLY_STRING || e->len >= ENTRY_MAX)
            continue;
        it->checked = it->exists = it->is_public = it->enabled = false;
        it->held = 0;
        it->summary_len = it->folded_len = 0;
        if (!(it->entry = arena_strndup(&f->req->pool, e->str, e->len))) {
            request_fail_internal(f->req, "out of memory");
            return;
        }
        it->entry_len = e->len;
        if (!entry_id(f->kind, e->str, e->len, it->id))
            continue;
        f->nitems++;
    }
    if (r->elements) {
        /* the next round reads after the last entry read, whatever it held */
        const redisReply *last = r->element[r->elements - 1];
        if (last->type == REDIS_REPLY_STRING && last->len < ENTRY_MAX) {
            memcpy(f->cursor, last->str, last->len);
            f->cursor_len = last->len;
        }
    }
    if (!f->nitems) {
        f->full = f->full && r->elements > 0;
        process_round(f);
        return;
    }
    find_send_checks(f, process_round);
}

static void on_range_req(void *data, int status, redisReply *r)
{
    request *req = data;
    on_range(req->state, status, r);
}

static void send_round(find_req *f)
{
    char count[BUF_INT_SIZE], start[ENTRY_MAX + 2], end[INDEXES_NAME_MAX + 2];
    buf_format_int(count, round_count(f));
    size_t slen, elen;
    const char *cmd;
    if (f->kind == LIST_NAMES) {
        cmd = "ZRANGEBYLEX";
        slen = (size_t)snprintf(start, sizeof start, "%c%.*s", f->cursor_len ? '(' : '[',
                                (int)(f->cursor_len ? f->cursor_len : f->qlen),
                                f->cursor_len ? f->cursor : f->q);
        elen = (size_t)snprintf(end, sizeof end, "[%.*s\xff", (int)f->qlen, f->q);
    } else {
        cmd = "ZREVRANGEBYLEX";
        if (f->cursor_len)
            slen = (size_t)snprintf(start, sizeof start, "(%.*s", (int)f->cursor_len, f->cursor);
        else
            slen = (size_t)snprintf(start, sizeof start, "+");
        elen = (size_t)snprintf(end, sizeof end, "-");
    }
    const char *argv[] = {cmd, f->range_key, start, end, "LIMIT", "0", count};
    size_t lens[] = {strlen(cmd), strlen(f->range_key), slen, elen, 5, 1, strlen(count)};
    find_mark_key(f, f->range_key, lens[1]);
    /* the first read carries the signature's deferred revocation check, if any */
    store_read(f->req->app->store, request_read_flags(f->req), on_range_req, f->req, 7, argv, lens);
}

/* ---- a round's outcome ---- */

static void append_roles(buf *b, int held)
{
    static const char *const names[] = {"\"owner\"", "\"admin\"", "\"member\""};
    buf_append_str(b, "\"roles\":[");
    bool first = true;
    for (int i = 0; i < 3; i++)
        if (held & (1 << i)) {
            if (!first)
                buf_append(b, ",", 1);
            buf_append_str(b, names[i]);
            first = false;
        }
    buf_append(b, "]", 1);
}

static void append_item(find_req *f, const find_item *it, int held)
{
    buf *b = &f->out;
    if (f->have)
        buf_append(b, ",", 1);
    if (f->kind == LIST_WALLET) {
        buf_append_str(b, "{\"entity\":");
        buf_append(b, f->rows.data + it->summary_at, it->summary_len);
        buf_append_str(b, "},");
        append_roles(b, held);
        int64_t ms = 0;
        for (int i = 0; i < 16; i++)
            ms = ms * 10 + (it->entry[i] - '0');
        char iso[ISOTIME_STRING_SIZE];
        isotime_format(ms, iso);
        buf_append_str(b, ",\"since\":\"");
        buf_append_str(b, iso);
        buf_append_str(b, "\"}");
    } else {
        buf_append(b, f->rows.data + it->summary_at, it->summary_len);
        buf_append(b, "}", 1);
    }
    f->have++;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

/* Drops, in one script call, the round's entries their entities no longer bear out: argv[head..
 * argc) are the entries' arguments. */
static void send_drops(find_req *f, const char **argv, size_t *lens, size_t head, size_t argc)
{
    if (f->kind == LIST_WALLET)
        indexes_send_drops(f->req->app, &f->wk, argv + head, lens + head, argc - head);
    else
        store_script(f->req->app->store, LUA_FIND_DIR_DROP, on_ignored, NULL, 3, (int)argc, argv,
                     lens);
}

static void finish(find_req *f, const char *next, size_t next_len)
{
    buf *b = &f->out;
    buf_append_str(b, "],\"nextCursor\":");
    if (next) {
        buf_append(b, "\"", 1);
        size_t at = b->len;
        if (buf_reserve(b, 2 * next_len + 4) != 0) {
            request_fail_internal(f->req, "out of memory");
            return;
        }
        hex_encode((const uint8_t *)next, next_len, b->data + at);
        b->len += 2 * next_len;
        buf_append_str(b, "\"}");
    } else {
        buf_append_str(b, "null}");
    }
    if (f->keep)
        findcache_put(f->req->app->finds, f->page_key, f->page_key_len, f->gen, f->marks, f->nmarks,
                      b->data, b->len);
    slice part = {b->data, b->len};
    request_reply_parts(f->req, 200, &part, 1);
}

static void process_round(find_req *f)
{
    if (f->failed) { /* a check went unanswered: its entity is unknown, so is the page */
        request_fail(f->req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    static const char letters[] = "oam";
    size_t max_args = 1 + KEYS_WALLET_N + 4 * f->nitems + 3;
    const char **argv = arena_alloc(&f->req->pool, max_args * sizeof *argv);
    size_t *lens = arena_alloc(&f->req->pool, max_args * sizeof *lens);
    char(*drop)[4] = arena_alloc(&f->req->pool, (f->nitems + 1) * sizeof *drop);
    if (!argv || !lens || !drop) {
        request_fail_internal(f->req, "out of memory");
        return;
    }
    size_t argc = 0, nkeys = f->kind == LIST_WALLET ? KEYS_WALLET_N : 3;
    char grace[BUF_INT_SIZE];
    buf_format_int(grace, f->req->app->cfg.find_repair_grace_ms);
    if (f->kind == LIST_WALLET) {
        for (size_t i = 0; i < KEYS_WALLET_N; i++)
            argv[argc] = f->wk.key[i], lens[argc++] = f->wk.len[i];
    } else {
        argv[argc] = KEYS_DIR_META, lens[argc++] = strlen(KEYS_DIR_META);
        argv[argc] = KEYS_DIR_CREATED, lens[argc++] = strlen(KEYS_DIR_CREATED);
        argv[argc] = KEYS_DIR_NAMES, lens[argc++] = strlen(KEYS_DIR_NAMES);
    }
    argv[argc] = grace, lens[argc++] = strlen(grace);
    size_t head = argc;
    const char *next = NULL;
    size_t next_len = 0;
    bool done = false;
    for (size_t i = 0; i < f->nitems; i++) {
        find_item *it = &f->items[i];
        if (done)
            break;
        bool show = false;
        int held = it->held;
        if (f->kind == LIST_WALLET) {
            /* drop the roles it no longer holds; the whole entry when it holds none */
            size_t nd = 0;
            bool none = !it->exists || held == 0;
            if (!none && f->role && !(held & f->role))
                drop[i][nd++] = letters[f->role == HELD_OWNER ? 0 : f->role == HELD_ADMIN ? 1 : 2];
            drop[i][nd] = '\0';
            if (none || nd) {
                argv[argc] = it->id, lens[argc++] = strlen(it->id);
                argv[argc] = it->entry, lens[argc++] = 16;
                argv[argc] = drop[i], lens[argc++] = nd;
                argv[argc] = none ? "1" : "0", lens[argc++] = 1;
            }
            show = !none && (!f->role || (held & f->role)) && it->summary_len &&
                   (f->see_all || (it->is_public && it->enabled));
        } else {
            bool stale = !it->exists ||
                         (f->kind == LIST_NAMES &&
                          (it->folded_len + 1 + strlen(it->id) != it->entry_len ||
                           memcmp(f->rows.data + it->folded_at, it->entry, it->folded_len) != 0));
            if (stale) {
                argv[argc] = it->id, lens[argc++] = strlen(it->id);
                argv[argc] = f->kind == LIST_CREATED && !it->exists ? it->entry : "";
                lens[argc++] = f->kind == LIST_CREATED && !it->exists ? it->entry_len : 0;
                argv[argc] = f->kind == LIST_NAMES ? it->entry : "";
                lens[argc++] = f->kind == LIST_NAMES ? it->entry_len : 0;
            }
            show = !stale && it->summary_len && it->is_public && it->enabled;
        }
        if (show && f->have < f->limit) {
            append_item(f, it, held);
            if (f->have == f->limit) {
                /* full: a cursor when anything may follow */
                if (i + 1 < f->nitems || f->full) {
                    next = it->entry;
                    next_len = it->entry_len;
                }
                done = true;
            }
        }
    }
    if (argc > head) {
        f->keep = false;
        send_drops(f, argv, lens, head, argc);
    }
    if (done || !f->full) {
        finish(f, next, next_len);
        return;
    }
    if (++f->rounds >= FIND_MAX_ROUNDS) {
        /* a short page, its cursor past what was read: bounded work per request */
        finish(f, f->cursor, f->cursor_len);
        return;
    }
    (void)nkeys;
    send_round(f);
}

/* ---- the requests ---- */

/* The page's key in the page cache: every input of the page (the caller only as whether it
 * sees every entity), lengths first, the cursor's bytes last. */
static void make_page_key(find_req *f)
{
    size_t wlen = f->kind == LIST_WALLET ? 42 : 0, head = 80;
    char *k = arena_alloc(&f->req->pool, head + wlen + f->qlen + f->cursor_len);
    if (!k)
        return; /* not kept, only made */
    int n = snprintf(k, head, "%d|%d|%d|%ld|%zu|%zu|", f->kind, f->role, f->see_all, f->limit, wlen,
                     f->qlen);
    if (n < 0 || (size_t)n >= head)
        return;
    size_t at = (size_t)n;
    memcpy(k + at, f->wallet, wlen);
    at += wlen;
    memcpy(k + at, f->q, f->qlen);
    at += f->qlen;
    memcpy(k + at, f->cursor, f->cursor_len);
    f->page_key = k;
    f->page_key_len = at + f->cursor_len;
}

/* The page kept, or made (and kept when it may be). */
static void find_serve(request *req)
{
    find_req *f = req->state;
    findcache *fc = req->app->finds;
    size_t len;
    const char *body = f->page_key ? findcache_get(fc, f->page_key, f->page_key_len, &len) : NULL;
    if (body) {
        slice part = {body, len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    f->keep = f->page_key && findcache_active(fc);
    f->gen = findcache_generation(fc);
    /* room for a page of summaries at once (a summary is 200-400 bytes), not grown step by step */
    buf_reserve(&f->rows, (size_t)(f->limit + 1) * 384);
    buf_reserve(&f->out, (size_t)f->limit * 448);
    buf_append_str(&f->out, "{\"success\":true,\"data\":[");
    send_round(f);
}

static void find_begin(find_req *f)
{
    request *req = f->req;
    findcache *fc = req->app->finds;
    if (findcache_active(fc))
        make_page_key(f);
    /* A kept page is answered with no read to carry the signature's revocation check (which
     * the sign-in step left for the first read): with the page cache on, it is made alone,
     * first (from the read cache after the signature's first use). */
    if (req->before_read && f->page_key)
        auth_check_revocation(req, find_serve);
    else
        find_serve(req);
}

static bool parse_limit(request *req, long *out)
{
    size_t len;
    long limit = 20;
    const char *lp = request_param(req, "limit", &len);
    if (lp) {
        limit = 0;
        for (size_t i = 0; i < len && limit <= 100; i++)
            limit = lp[i] >= '0' && lp[i] <= '9' ? limit * 10 + (lp[i] - '0') : 100000;
        if (!len || limit < 1 || limit > 100) {
            request_fail_field(req, "limit", "limit must be an integer from 1 to 100.");
            return false;
        }
    }
    *out = limit;
    return true;
}

static bool parse_cursor(request *req, find_req *f)
{
    size_t len;
    const char *cp = request_param(req, "cursor", &len);
    if (!cp || !len)
        return true;
    char id[IDS_SIZE];
    if (len % 2 || len / 2 >= ENTRY_MAX ||
        hex_decode(cp, len, (uint8_t *)f->cursor, len / 2) != 0 ||
        !entry_id(f->kind, f->cursor, len / 2, id) ||
        (f->kind == LIST_NAMES && (len / 2 < f->qlen || memcmp(f->cursor, f->q, f->qlen)))) {
        request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
        return false;
    }
    f->cursor_len = len / 2;
    f->cursor[f->cursor_len] = '\0';
    return true;
}

static find_req *find_start(request *req, int kind)
{
    find_req *f = request_state(req, sizeof *f);
    if (!f)
        return NULL;
    f->req = req;
    f->kind = kind;
    req->on_reset = find_release;
    req->on_reset_data = f;
    if (!parse_limit(req, &f->limit))
        return NULL;
    return f;
}

void wallet_entities_get(request *req)
{
    find_req *f = find_start(req, LIST_WALLET);
    if (!f)
        return;
    slice a = request_path_param(req, 0);
    verr e;
    if (validate_address(a.s, a.len, "address", f->wallet, &e) != 0) {
        request_fail(req, 404, "not_found", "No such wallet address.", NULL);
        return;
    }
    keys_wallet(&f->wk, f->wallet);
    size_t len;
    const char *role = request_param(req, "role", &len);
    int slot = 1;
    if (role) {
        if (!strcmp(role, "owner"))
            f->role = HELD_OWNER, slot = 2;
        else if (!strcmp(role, "admin"))
            f->role = HELD_ADMIN, slot = 3;
        else if (!strcmp(role, "member"))
            f->role = HELD_MEMBER, slot = 4;
        else {
            request_fail_field(req, "role", "role must be owner, admin or member.");
            return;
        }
    }
    f->range_key = f->wk.key[slot];
    f->see_all =
        !strcmp(req->caller, f->wallet) || auth_is_platform_admin(req->app->auth, req->caller);
    if (!parse_cursor(req, f))
        return;
    find_begin(f);
}

void entities_list_get(request *req)
{
    size_t len;
    const char *q = request_param(req, "q", &len);
    find_req *f = find_start(req, q ? LIST_NAMES : LIST_CREATED);
    if (!f)
        return;
    if (q) {
        f->qlen = indexes_fold(q, len, f->q);
        size_t chars = 0;
        for (size_t i = 0; i < f->qlen; i++)
            chars += ((unsigned char)f->q[i] & 0xC0) != 0x80;
        if (chars < 2 || chars > 100) {
            request_fail_field(req, "q", "q must be 2 to 100 characters.");
            return;
        }
        f->range_key = KEYS_DIR_NAMES;
    } else {
        f->range_key = KEYS_DIR_CREATED;
    }
    if (!parse_cursor(req, f))
        return;
    find_begin(f);
}
