/* findcache: see findcache.h. Each page is one allocation: the header, its marks, the key,
 * then the body; the slot owns it. */
#include "cache/findcache.h"

#include "core/metrics.h"

#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS      64
#define BYTES_PER_SLOT 4096 /* a page of 20 is 5-10 KiB with its marks */
#define EVICT_SCAN     64   /* slots one store may empty to stay within the budget */

typedef struct entry {
    uint64_t hash, gen, used; /* used: the cache's clock at its last hit or fill */
    size_t size, klen, nmarks, blen;
    readcache_mark marks[]; /* then the key, then the body */
} entry;

struct findcache {
    readcache *rc;
    entry **slots;
    size_t nslots, max_bytes, hand;
    uint64_t clock;
    findcache_stats stats;
};

static const char *entry_key(const entry *e)
{
    return (const char *)(e->marks + e->nmarks);
}

/* Eight bytes a step (as the read cache hashes its reads): a key is a hundred bytes or so,
 * hashed on every page asked for. */
static uint64_t hash_key(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

findcache *findcache_new(size_t max_bytes, readcache *rc)
{
    if (max_bytes == 0 || !rc)
        return NULL;
    findcache *fc = calloc(1, sizeof *fc);
    if (!fc)
        return NULL;
    size_t n = MIN_SLOTS;
    while (n < max_bytes / BYTES_PER_SLOT && n < ((size_t)1 << 22))
        n <<= 1;
    fc->slots = calloc(n, sizeof *fc->slots);
    if (!fc->slots) {
        free(fc);
        return NULL;
    }
    fc->rc = rc;
    fc->nslots = n;
    fc->max_bytes = max_bytes;
    return fc;
}

static void drop(findcache *fc, entry **slot)
{
    fc->stats.bytes -= (*slot)->size;
    fc->stats.entries--;
    free(*slot);
    *slot = NULL;
}

void findcache_free(findcache *fc)
{
    if (!fc)
        return;
    for (size_t i = 0; i < fc->nslots; i++)
        if (fc->slots[i])
            drop(fc, &fc->slots[i]);
    free(fc->slots);
    free(fc);
}

bool findcache_active(const findcache *fc)
{
    return fc && readcache_enabled(fc->rc);
}

uint64_t findcache_generation(const findcache *fc)
{
    return fc ? readcache_generation(fc->rc) : 0;
}

readcache_mark findcache_mark(const findcache *fc, const char *key, size_t len)
{
    return readcache_mark_key(fc->rc, key, len);
}

/* Two-way: a page may sit in either slot of its pair. */
static entry **find(findcache *fc, uint64_t h, const char *key, size_t klen)
{
    size_t i = h & (fc->nslots - 1);
    for (int way = 0; way < 2; way++) {
        entry **slot = &fc->slots[i ^ (size_t)way];
        entry *e = *slot;
        if (e && e->hash == h && e->klen == klen && memcmp(entry_key(e), key, klen) == 0)
            return slot;
    }
    return NULL;
}

const char *findcache_get(findcache *fc, const char *key, size_t klen, size_t *body_len)
{
    if (!fc)
        return NULL;
    uint64_t h = hash_key(key, klen);
    entry **slot = find(fc, h, key, klen);
    if (!slot) {
        fc->stats.misses++;
        return NULL;
    }
    entry *e = *slot;
    if (!readcache_marks_current(fc->rc, e->gen, e->marks, e->nmarks)) {
        fc->stats.stale++;
        drop(fc, slot);
        return NULL;
    }
    fc->stats.hits++;
    e->used = ++fc->clock;
    *body_len = e->blen;
    return entry_key(e) + e->klen;
}

void findcache_put(findcache *fc, const char *key, size_t klen, uint64_t gen,
                   const readcache_mark *marks, size_t nmarks, const char *body, size_t blen)
{
    if (!fc)
        return;
    if (nmarks > FINDCACHE_MAX_MARKS || blen > FINDCACHE_MAX_BODY ||
        !readcache_marks_current(fc->rc, gen, marks, nmarks)) {
        fc->stats.dropped++;
        return;
    }
    size_t size = sizeof(entry) + nmarks * sizeof *marks + klen + blen;
    uint64_t h = hash_key(key, klen);
    /* The same key's slot; else an empty one of the pair; else the one used longer ago. */
    entry **slot = find(fc, h, key, klen);
    if (!slot) {
        entry **a = &fc->slots[h & (fc->nslots - 1)], **b = &fc->slots[(h & (fc->nslots - 1)) ^ 1];
        slot = !*a ? a : !*b ? b : (*a)->used <= (*b)->used ? a : b;
    }
    if (*slot)
        drop(fc, slot);
    /* Over budget: empty the slots after the hand, as a clock would, a few at a time. */
    for (int i = 0; i < EVICT_SCAN && fc->stats.bytes + size > fc->max_bytes; i++) {
        fc->hand = (fc->hand + 1) & (fc->nslots - 1);
        if (fc->slots[fc->hand])
            drop(fc, &fc->slots[fc->hand]);
    }
    if (fc->stats.bytes + size > fc->max_bytes) {
        fc->stats.dropped++;
        return;
    }
    entry *e = malloc(size);
    if (!e) {
        fc->stats.dropped++; /* a page not kept is only a later miss */
        return;
    }
    e->hash = h;
    e->gen = gen;
    e->used = ++fc->clock;
    e->size = size;
    e->klen = klen;
    e->nmarks = nmarks;
    e->blen = blen;
    if (nmarks)
        memcpy(e->marks, marks, nmarks * sizeof *marks);
    char *at = (char *)(e->marks + nmarks);
    memcpy(at, key, klen);
    memcpy(at + klen, body, blen);
    *slot = e;
    fc->stats.bytes += size;
    fc->stats.entries++;
    fc->stats.fills++;
}

const findcache_stats *findcache_get_stats(const findcache *fc)
{
    return &fc->stats;
}

void findcache_render_metrics(buf *out, void *ctx)
{
    findcache *fc = ctx;
    findcache_stats none = {0};
    const findcache_stats *fs = fc ? findcache_get_stats(fc) : &none;
    metrics_family(out, "entityd_find_page_cache_total", "counter",
                   "Find pages (a wallet's entities, the directory) by page cache outcome.");
    buf_printf(out,
               "entityd_find_page_cache_total{outcome=\"hit\"} %llu\n"
               "entityd_find_page_cache_total{outcome=\"miss\"} %llu\n"
               "entityd_find_page_cache_total{outcome=\"stale\"} %llu\n",
               (unsigned long long)fs->hits, (unsigned long long)fs->misses,
               (unsigned long long)fs->stale);
    metrics_counter(out, "entityd_find_page_cache_dropped_total",
                    "Pages not kept: a key changed while they were made, or too large.",
                    fs->dropped);
    metrics_gauge(out, "entityd_find_page_cache_bytes", "Memory held by kept find pages.",
                  (double)fs->bytes);
    metrics_gauge(out, "entityd_find_page_cache_entries", "Find pages kept.", (double)fs->entries);
}
