/* readcache: see readcache.h. Each answer is one allocation: the header, the read's bytes, then
 * the reply tree laid out flat (every node, string and element vector inside it), so a hit
 * hands out a pointer and a drop is one free(). The slot owns it. */
#include "cache/readcache.h"

#include "cache/slotset.h"
#include "core/metrics.h"

#include <stdlib.h>
#include <string.h>

/* Key counters: a key's changes move the counter its name hashes to. Two keys sharing one
 * only cost an answer now and then, never a stale one. */
#define KEY_SLOTS      (1u << 16)
#define MAX_DEPTH      4
#define BYTES_PER_SLOT 1024 /* the budget over this gives the number of slots */

typedef struct entry {
    slotset_head head; /* first: the slot set holds a pointer to it */
    uint64_t gen;
    int nkeys;
    uint32_t slot[READCACHE_MAX_KEYS], count[READCACHE_MAX_KEYS];
    size_t size, read_len;
    redisReply *reply; /* inside this allocation */
    char *rendered;    /* NULL, or the one rendering kept beside it (its own allocation) */
    size_t rendered_len;
    int64_t rendered_until;
    char read[];
} entry;

struct readcache {
    slotset set;
    size_t max_bytes;
    uint64_t gen;
    entry *last; /* the entry the last readcache_get() hit, while it lives */
    bool enabled;
    uint32_t *counts; /* KEY_SLOTS */
    readcache_stats stats;
    readcache_listener listener;
    void *listener_ctx;
};

readcache *readcache_new(size_t max_bytes)
{
    readcache *rc = calloc(1, sizeof *rc);
    if (!rc)
        return NULL;
    rc->counts = calloc(KEY_SLOTS, sizeof *rc->counts);
    if (!rc->counts || slotset_init(&rc->set, max_bytes, BYTES_PER_SLOT, (size_t)1 << 24) != 0) {
        free(rc->counts);
        free(rc);
        return NULL;
    }
    rc->max_bytes = max_bytes;
    rc->gen = 1;
    return rc;
}

static void drop(void *owner, slotset_head **slot)
{
    readcache *rc = owner;
    entry *e = (entry *)*slot;
    if (rc->last == e)
        rc->last = NULL;
    rc->stats.bytes -= e->size + e->rendered_len;
    rc->stats.entries--;
    free(e->rendered);
    free(e);
    *slot = NULL;
}

static void empty(readcache *rc)
{
    slotset_clear(&rc->set, drop, rc);
    rc->gen++;
}

void readcache_set_listener(readcache *rc, readcache_listener fn, void *ctx)
{
    rc->listener = fn;
    rc->listener_ctx = ctx;
}

static void tell(readcache *rc, const char *key, size_t len)
{
    if (rc->listener)
        rc->listener(rc->listener_ctx, key, len);
}

void readcache_free(readcache *rc)
{
    if (!rc)
        return;
    slotset_fini(&rc->set, drop, rc);
    free(rc->counts);
    free(rc);
}

void readcache_set_enabled(readcache *rc, bool on)
{
    empty(rc);
    rc->enabled = on;
    tell(rc, NULL, 0);
}

bool readcache_enabled(const readcache *rc)
{
    return rc && rc->enabled;
}

void readcache_flush(readcache *rc)
{
    empty(rc);
    rc->stats.flushes++;
    tell(rc, NULL, 0);
}

static bool current(const readcache *rc, uint64_t gen, int nkeys, const uint32_t *slot,
                    const uint32_t *count)
{
    if (!rc->enabled || gen != rc->gen || nkeys < 0)
        return false;
    for (int i = 0; i < nkeys; i++)
        if (rc->counts[slot[i]] != count[i])
            return false;
    return true;
}

static bool same_read(const slotset_head *h, const char *read, size_t len)
{
    const entry *e = (const entry *)h;
    return e->read_len == len && memcmp(e->read, read, len) == 0;
}

const redisReply *readcache_get(readcache *rc, const char *read, size_t len)
{
    slotset_head **slot = slotset_find(&rc->set, slotset_hash(read, len), read, len, same_read);
    if (!slot) {
        rc->stats.misses++;
        return NULL;
    }
    entry *e = (entry *)*slot;
    if (!current(rc, e->gen, e->nkeys, e->slot, e->count)) {
        rc->stats.stale++;
        drop(rc, slot);
        return NULL;
    }
    rc->stats.hits++;
    slotset_touch(&rc->set, &e->head);
    rc->last = e;
    return e->reply;
}

/* The entry whose answer `reply` is, when it is the one the last lookup handed out. A reply
 * from Redis never matches: the last entry's memory is its own while it lives, and `last` is
 * cleared when it goes. */
static entry *handed_out(readcache *rc, const redisReply *reply)
{
    return rc && rc->last && rc->last->reply == reply ? rc->last : NULL;
}

const char *readcache_rendered(readcache *rc, const redisReply *reply, int64_t now_ms, size_t *len)
{
    entry *e = handed_out(rc, reply);
    if (!e || !e->rendered || now_ms >= e->rendered_until)
        return NULL;
    rc->stats.rendered_hits++;
    *len = e->rendered_len;
    return e->rendered;
}

void readcache_keep_rendered(readcache *rc, const redisReply *reply, int64_t until_ms,
                             const char *body, size_t len)
{
    entry *e = handed_out(rc, reply);
    if (!e || len > READCACHE_MAX_ENTRY || rc->stats.bytes - e->rendered_len + len > rc->max_bytes)
        return;
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return;
    memcpy(copy, body, len);
    rc->stats.bytes = rc->stats.bytes - e->rendered_len + len;
    free(e->rendered);
    e->rendered = copy;
    e->rendered_len = len;
    e->rendered_until = until_ms;
}

void readcache_ticket_begin(const readcache *rc, readcache_ticket *t)
{
    t->gen = rc->gen;
    t->nkeys = 0;
}

static uint32_t key_slot(const char *key, size_t len)
{
    return (uint32_t)(slotset_hash(key, len) & (KEY_SLOTS - 1));
}

void readcache_ticket_key(const readcache *rc, readcache_ticket *t, const char *key, size_t len)
{
    if (t->nkeys < 0)
        return;
    if (t->nkeys == READCACHE_MAX_KEYS) {
        t->nkeys = -1;
        return;
    }
    uint32_t s = key_slot(key, len);
    t->slot[t->nkeys] = s;
    t->count[t->nkeys] = rc->counts[s];
    t->nkeys++;
}

uint64_t readcache_generation(const readcache *rc)
{
    return rc->gen;
}

readcache_mark readcache_mark_key(const readcache *rc, const char *key, size_t len)
{
    uint32_t s = key_slot(key, len);
    return (readcache_mark){s, rc->counts[s]};
}

bool readcache_marks_current(const readcache *rc, uint64_t gen, const readcache_mark *m, size_t n)
{
    if (!rc || !rc->enabled || gen != rc->gen)
        return false;
    for (size_t i = 0; i < n; i++)
        if (rc->counts[m[i].slot] != m[i].count)
            return false;
    return true;
}

void readcache_invalidate(readcache *rc, const char *key, size_t len)
{
    rc->counts[key_slot(key, len)]++;
    rc->stats.invalidations++;
    tell(rc, key, len);
}

const readcache_stats *readcache_get_stats(const readcache *rc)
{
    return &rc->stats;
}

/* --- flat copies of reply trees --- */

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Bytes a flat copy of r takes, or 0 when it must not be kept (an error, too deep). */
static size_t flat_size(const redisReply *r, int depth)
{
    if (depth > MAX_DEPTH)
        return 0;
    size_t n = align8(sizeof *r);
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        return n + align8(r->len + 1);
    case REDIS_REPLY_INTEGER:
    case REDIS_REPLY_NIL:
        return n;
    case REDIS_REPLY_ARRAY:
        n += align8(r->elements * sizeof(redisReply *));
        for (size_t i = 0; i < r->elements; i++) {
            size_t c = flat_size(r->element[i], depth + 1);
            if (c == 0)
                return 0;
            n += c;
        }
        return n;
    default: /* errors are answers of the moment; and nothing else is expected */
        return 0;
    }
}

static redisReply *flat_copy(const redisReply *r, char **at)
{
    redisReply *c = (redisReply *)*at;
    *at += align8(sizeof *c);
    memset(c, 0, sizeof *c);
    c->type = r->type;
    c->integer = r->integer;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        c->str = *at;
        c->len = r->len;
        memcpy(c->str, r->str, r->len);
        c->str[r->len] = '\0';
        *at += align8(r->len + 1);
    } else if (r->type == REDIS_REPLY_ARRAY) {
        c->elements = r->elements;
        c->element = (redisReply **)*at;
        *at += align8(r->elements * sizeof(redisReply *));
        for (size_t i = 0; i < r->elements; i++)
            c->element[i] = flat_copy(r->element[i], at);
    }
    return c;
}

void readcache_put(readcache *rc, const readcache_ticket *t, const char *read, size_t len,
                   const redisReply *reply)
{
    if (!current(rc, t->gen, t->nkeys, t->slot, t->count)) {
        rc->stats.dropped++;
        return;
    }
    size_t tree = flat_size(reply, 0);
    size_t size = align8(sizeof(entry) + len) + tree;
    if (tree == 0 || size > READCACHE_MAX_ENTRY) {
        rc->stats.dropped++;
        return;
    }
    /* Copied before anything is dropped: the reply may be one this cache handed out (an
     * answer kept whole, part of which is kept again under another read). */
    entry *e = malloc(size);
    if (!e) {
        rc->stats.dropped++; /* an answer not kept is only a later miss */
        return;
    }
    uint64_t h = slotset_hash(read, len);
    e->head.hash = h;
    e->gen = t->gen;
    e->nkeys = t->nkeys;
    memcpy(e->slot, t->slot, sizeof e->slot);
    memcpy(e->count, t->count, sizeof e->count);
    e->size = size;
    e->read_len = len;
    memcpy(e->read, read, len);
    char *at = (char *)e + align8(sizeof(entry) + len);
    e->reply = flat_copy(reply, &at);
    e->rendered = NULL;
    e->rendered_len = 0;
    slotset_head **slot = slotset_claim(&rc->set, h, read, len, same_read, drop, rc);
    if (!slotset_make_room(&rc->set, &rc->stats.bytes, size, rc->max_bytes, drop, rc)) {
        free(e);
        rc->stats.dropped++;
        return;
    }
    slotset_touch(&rc->set, &e->head);
    *slot = &e->head;
    rc->stats.bytes += size;
    rc->stats.entries++;
    rc->stats.fills++;
}

void readcache_render_metrics(buf *out, void *ctx)
{
    readcache *rc = ctx;
    readcache_stats none = {0};
    const readcache_stats *rs = rc ? readcache_get_stats(rc) : &none;
    const metrics_labelled outcomes[] = {
        {"hit", rs->hits}, {"miss", rs->misses}, {"stale", rs->stale}};
    metrics_counter_by(out, "entityd_read_cache_total", "Reads through the read cache by outcome.",
                       "outcome", outcomes, 3);
    metrics_counter(out, "entityd_read_cache_rendered_total",
                    "Hits answered with the rendering kept beside the answer.", rs->rendered_hits);
    metrics_counter(out, "entityd_read_cache_invalidations_total",
                    "Keys Redis (or a write of ours) said changed.", rs->invalidations);
    metrics_gauge(out, "entityd_read_cache_enabled",
                  "1 while Redis delivers invalidations and the cache answers reads.",
                  readcache_enabled(rc) ? 1 : 0);
    metrics_gauge(out, "entityd_read_cache_bytes", "Memory held by kept answers.",
                  (double)rs->bytes);
    metrics_gauge(out, "entityd_read_cache_entries", "Answers kept.", (double)rs->entries);
}
