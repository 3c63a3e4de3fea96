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
    bool failed; /* a check went unanswered: the page cannot be told */
    bool full;   /* the round's read returned all it asked for: more may follow */
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

static void find_release(void *data)
{
    find_req *f = data;
    buf_free(&f->out);
    buf_free(&f->rows);
}

static void send_round(find_req *f);

/* Marks a key about to be read, for the page cache; past FINDCACHE_MAX_MARKS the page is not
 * kept. */
static void mark_key(find_req *f, const char *key, size_t len)
{
    if (!f->keep)
        return;
    if (f->nmarks == f->cap_marks) {
        size_t cap = f->cap_marks ? 2 * f->cap_marks : 128;
        readcache_mark *m =
            cap <= FINDCACHE_MAX_MARKS ? arena_alloc(&f->req->pool, cap * sizeof *m) : NULL;
        if (!m) {
            f->keep = false;
            return;
        }
        if (f->nmarks)
            memcpy(m, f->marks, f->nmarks * sizeof *m);
        f->marks = m;
        f->cap_marks = cap;
    }
    f->marks[f->nmarks++] = findcache_mark(f->req->app->finds, key, len);
}

/* ---- one entity's check ---- */

static bool reply_flag(const redisReply *r)
{
    return !(r->type == REDIS_REPLY_STRING && r->len == 1 && r->str[0] == '0');
}

static void append_field(buf *b, const char *name, const redisReply *r)
{
    buf_append_str(b, name);
    buf_append(b, "\"", 1);
    if (r->type == REDIS_REPLY_STRING)
        buf_append_json_escaped(b, r->str, r->len);
    buf_append(b, "\"", 1);
}

/* Renders the summary from {HMGET id name description imageURL communityURLAlias public
 * isEnabled}: no decoding of the entity's JSON. */
static void check_fields(find_req *f, find_item *it, const redisReply *h)
{
    if (h->type != REDIS_REPLY_ARRAY || h->elements != 7 ||
        h->element[0]->type != REDIS_REPLY_STRING)
        return;
    it->exists = true;
    it->is_public = reply_flag(h->element[5]);
    it->enabled = reply_flag(h->element[6]);
    buf *b = &f->rows;
    /* every kind folds: in cluster mode the directory's two kinds read one entity with the
     * same commands, so they share the read-cache entry and the rendering kept beside it */
    if (h->element[1]->type == REDIS_REPLY_STRING) {
        char folded[INDEXES_NAME_MAX];
        it->folded_len = indexes_fold(h->element[1]->str, h->element[1]->len, folded);
        it->folded_at = b->len;
        buf_append(b, folded, it->folded_len);
    }
    it->summary_at = b->len;
    append_field(b, "{\"id\":", h->element[0]);
    append_field(b, ",\"name\":", h->element[1]);
    append_field(b, ",\"description\":", h->element[2]);
    append_field(b, ",\"imageURL\":", h->element[3]);
    append_field(b, ",\"communityURLAlias\":", h->element[4]);
    buf_append_str(b, it->is_public ? ",\"public\":true" : ",\"public\":false");
    buf_append_str(b, it->enabled ? ",\"isEnabled\":true" : ",\"isEnabled\":false");
    it->summary_len = b->len - it->summary_at;
}

static void process_round(find_req *f);

typedef struct check_ctx {
    find_req *f;
    find_item *it;
} check_ctx;

static void check_done(find_req *f)
{
    if (--f->pending == 0)
        process_round(f);
}

/* Applies one entity's replies: el[0] the HMGET, then its role lookups (a wallet's list) or
 * the HLEN of its members (the directory). */
static void check_item(find_req *f, find_item *it, redisReply *const *el, size_t n)
{
    it->checked = true;
    check_fields(f, it, el[0]);
    if (f->kind == LIST_WALLET && n == 4) {
        it->held = (el[1]->integer ? HELD_OWNER : 0) | (el[2]->integer ? HELD_ADMIN : 0) |
                   (el[3]->integer ? HELD_MEMBER : 0);
    } else if (f->kind != LIST_WALLET && n == 2 && it->summary_len &&
               el[1]->type == REDIS_REPLY_INTEGER) {
        /* memberCount: the member hash's cardinality, right after the summary in rows */
        buf_append_str(&f->rows, ",\"memberCount\":");
        buf_append_uint(&f->rows, el[1]->integer > 0 ? (unsigned long long)el[1]->integer : 0);
        it->summary_len = f->rows.len - it->summary_at;
    }
}

/* Entities per transaction outside Redis Cluster: as many as the read cache keeps the answer
 * of (READCACHE_MAX_KEYS keys; an entity's check reads 4, or 2 for the directory). */
static size_t check_run_size(const find_req *f)
{
    return READCACHE_MAX_KEYS / (f->kind == LIST_WALLET ? 4 : 2);
}

/* Commands per entity check: the HMGET, then 3 role lookups or 1 HLEN. */
static size_t check_width(const find_req *f)
{
    return f->kind == LIST_WALLET ? 4 : 2;
}

/* What the checks of a transaction's entities made of its answer, kept beside the answer in
 * the read cache (readcache_keep_rendered), so that the next page reading it from there copies
 * it instead of rendering again (JSON escaping, folding). KEPT_MAGIC and the number of
 * entities (a byte), then per entity: this header, the folded name, the summary. */
#define KEPT_MAGIC "fnd1"
#define KEPT_HEAD  5
typedef struct kept_item {
    uint8_t exists, is_public, enabled, held;
    uint32_t folded_len, summary_len;
} kept_item;

/* Applies a kept rendering to items [at, at + n). Returns 0, or -1 when it does not fit them
 * (nothing then applied that a fresh check would not overwrite). */
static int unpack_run(find_req *f, size_t at, size_t n, const char *p, size_t len)
{
    const char *end = p + len;
    if (len < KEPT_HEAD || memcmp(p, KEPT_MAGIC, 4) != 0 || (unsigned char)p[4] != n)
        return -1; /* not ours */
    p += KEPT_HEAD;
    for (size_t i = at; i < at + n; i++) {
        find_item *it = &f->items[i];
        kept_item k;
        if ((size_t)(end - p) < sizeof k)
            return -1;
        memcpy(&k, p, sizeof k);
        p += sizeof k;
        if ((size_t)(end - p) < k.folded_len || (size_t)(end - p) - k.folded_len < k.summary_len)
            return -1;
        it->checked = true;
        it->exists = k.exists, it->is_public = k.is_public, it->enabled = k.enabled;
        it->held = k.held;
        /* the folded name and the summary, back to back in rows as check_fields leaves them */
        it->folded_at = f->rows.len;
        it->folded_len = k.folded_len;
        it->summary_at = f->rows.len + k.folded_len;
        it->summary_len = k.summary_len;
        if (buf_append(&f->rows, p, k.folded_len + k.summary_len) != 0)
            return -1;
        p += k.folded_len + k.summary_len;
    }
    return p == end ? 0 : -1;
}

/* Keeps what the checks made of items [at, at + n) beside the answer r, when r came from the
 * read cache (for an answer from Redis, the call does nothing: the next page keeps it). */
static void keep_run(find_req *f, size_t at, size_t n, const redisReply *r)
{
    size_t size = KEPT_HEAD;
    for (size_t i = at; i < at + n; i++)
        size += sizeof(kept_item) + f->items[i].folded_len + f->items[i].summary_len;
    char *blob = arena_alloc(&f->req->pool, size), *p = blob;
    if (!blob || n > 255)
        return;
    memcpy(p, KEPT_MAGIC, 4);
    p[4] = (char)n;
    p += KEPT_HEAD;
    for (size_t i = at; i < at + n; i++) {
        const find_item *it = &f->items[i];
        kept_item k = {it->exists,
                       it->is_public,
                       it->enabled,
                       (uint8_t)it->held,
                       (uint32_t)it->folded_len,
                       (uint32_t)it->summary_len};
        memcpy(p, &k, sizeof k);
        p += sizeof k;
        memcpy(p, f->rows.data + it->folded_at, it->folded_len);
        p += it->folded_len;
        memcpy(p, f->rows.data + it->summary_at, it->summary_len);
        p += it->summary_len;
    }
    readcache_keep_rendered(f->req->app->reads, r, INT64_MAX, blob, size);
}

/* The answer to the checks of items [at, at + n), one transaction: the rendering kept beside
 * it when there is one, else the checks, whose rendering is then kept. */
static void apply_run(find_req *f, size_t at, size_t n, int status, const redisReply *r)
{
    size_t w = check_width(f), len;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements != n * w) {
        f->failed = true;
        return;
    }
    const char *kept = readcache_rendered(f->req->app->reads, r, 0, &len);
    if (kept && unpack_run(f, at, n, kept, len) == 0)
        return;
    for (size_t i = at; i < at + n; i++)
        check_item(f, &f->items[i], r->element + (i - at) * w, w);
    keep_run(f, at, n, r);
}

/* One entity's transaction (cluster mode: each entity in its own slot). */
static void on_check(void *data, int status, redisReply *r)
{
    check_ctx *c = data;
    apply_run(c->f, (size_t)(c->it - c->f->items), 1, status, r);
    check_done(c->f);
}

/* A run of entities' commands in one transaction (one Redis: one read, one read-cache entry). */
typedef struct check_run {
    find_req *f;
    size_t at, n;
} check_run;

static void on_check_run(void *data, int status, redisReply *r)
{
    check_run *c = data;
    apply_run(c->f, c->at, c->n, status, r);
    check_done(c->f);
}

/* The argument vectors of one entity's check, alive until the commands are sent. */
typedef struct check_args {
    entity_role_keys k;
    const char *hm[9], *ro[3][3], *hlen[2];
    size_t hl[9], rl[3][3], hlenl[2];
} check_args;

static void check_cmds(find_req *f, const find_item *it, check_args *a, store_cmd *out)
{
    static const char *const fields[] = {
        "HMGET",  "",         "id", "name", "description", "imageURL", "communityURLAlias",
        "public", "isEnabled"};
    entity_role_keys *k = &a->k;
    keys_entity_roles(k, it->id);
    mark_key(f, k->entity, k->entity_len);
    if (f->kind == LIST_WALLET) {
        mark_key(f, k->owners, k->owners_len);
        mark_key(f, k->admins, k->admins_len);
    }
    mark_key(f, k->members, k->members_len);
    for (int j = 0; j < 9; j++) {
        a->hm[j] = j == 1 ? k->entity : fields[j];
        a->hl[j] = j == 1 ? k->entity_len : strlen(fields[j]);
    }
    out[0] = (store_cmd){9, a->hm, a->hl};
    if (f->kind == LIST_WALLET) {
        static const char *const names[3] = {"SISMEMBER", "SISMEMBER", "HEXISTS"};
        const char *keys[3] = {k->owners, k->admins, k->members};
        size_t klens[3] = {k->owners_len, k->admins_len, k->members_len};
        for (int j = 0; j < 3; j++) {
            a->ro[j][0] = names[j], a->rl[j][0] = strlen(names[j]);
            a->ro[j][1] = keys[j], a->rl[j][1] = klens[j];
            a->ro[j][2] = f->wallet, a->rl[j][2] = 42;
            out[1 + j] = (store_cmd){3, a->ro[j], a->rl[j]};
        }
    } else {
        a->hlen[0] = "HLEN", a->hlenl[0] = 4;
        a->hlen[1] = k->members, a->hlenl[1] = k->members_len;
        out[1] = (store_cmd){2, a->hlen, a->hlenl};
    }
}

/* Checks every item of the round, all at once: one transaction per entity in cluster mode
 * (each in its slot: one round trip per slot), else one per few entities, kept in the read
 * cache under the kind, the wallet and the ids it reads. */
static void send_checks(find_req *f)
{
    f->pending = 1;
    f->failed = false;
    size_t w = check_width(f);
    bool cluster = store_cluster_mode(f->req->app->store);
    check_args *args = arena_alloc(&f->req->pool, (cluster ? 1 : f->nitems) * sizeof *args);
    store_cmd *cmds = arena_alloc(&f->req->pool, f->nitems * w * sizeof *cmds);
    check_ctx *ctx = cluster ? arena_alloc(&f->req->pool, f->nitems * sizeof *ctx) : NULL;
    if (!args || !cmds || (cluster && !ctx)) {
        request_fail_internal(f->req, "out of memory");
        return;
    }
    if (cluster) {
        for (size_t i = 0; i < f->nitems; i++) {
            ctx[i] = (check_ctx){f, &f->items[i]};
            check_cmds(f, &f->items[i], args, cmds);
            f->pending++;
            store_read_exec(f->req->app->store, 0, on_check, &ctx[i], (int)w, cmds);
        }
        check_done(f);
        return;
    }
    size_t per = check_run_size(f);
    for (size_t at = 0; at < f->nitems; at += per) {
        size_t n = f->nitems - at < per ? f->nitems - at : per;
        check_run *run = arena_alloc(&f->req->pool, sizeof *run);
        char *key = arena_alloc(&f->req->pool, 48 + n * IDS_SIZE);
        if (!run || !key) {
            f->failed = true;
            break;
        }
        *run = (check_run){f, at, n};
        size_t klen = (size_t)snprintf(key, 48, "F%d|%s|", f->kind, f->wallet);
        for (size_t i = at; i < at + n; i++) {
            check_cmds(f, &f->items[i], &args[i], cmds + i * w);
            size_t idn = strlen(f->items[i].id);
            memcpy(key + klen, f->items[i].id, idn);
            klen += idn;
        }
        f->pending++;
        store_read_exec_as(f->req->app->store, 0, key, klen, on_check_run, run, (int)(n * w),
                           cmds + at * w);
    }
    check_done(f);
}

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
    send_checks(f);
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
    mark_key(f, f->range_key, lens[1]);
    /* the first read carries the signature's deferred revocation check, if any */
    auth_store_command(f->req, on_range_req, 7, argv, lens);
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
    if (req->revocation_key && f->page_key)
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
