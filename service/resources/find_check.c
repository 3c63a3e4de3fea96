/* find_check: the checks of find's index entries against the entities themselves (find.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "resources/find.h"
#include "cache/readcache.h"
#include "core/app.h"
#include "core/arena.h"
#include "redis/keys.h"
#include "redis/store.h"

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

void find_mark_key(find_req *f, const char *key, size_t len)
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

typedef struct check_ctx {
    find_req *f;
    find_item *it;
} check_ctx;

static void check_done(find_req *f)
{
    if (--f->pending == 0)
        f->checked(f);
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
    find_mark_key(f, k->entity, k->entity_len);
    if (f->kind == LIST_WALLET) {
        find_mark_key(f, k->owners, k->owners_len);
        find_mark_key(f, k->admins, k->admins_len);
    }
    find_mark_key(f, k->members, k->members_len);
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
void find_send_checks(find_req *f, void (*checked)(find_req *f))
{
    f->checked = checked;
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
