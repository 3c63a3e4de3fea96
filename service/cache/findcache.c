/* findcache: see findcache.h. Each page is one allocation: the header, its marks, the key,
 * then the body; the slot owns it. */
#include "cache/findcache.h"

#include "cache/slotset.h"
#include "core/metrics.h"

#include <stdlib.h>
#include <string.h>

#define BYTES_PER_SLOT 4096 /* a page of 20 is 5-10 KiB with its marks */

typedef struct entry {
    slotset_head head; /* first: the slot set holds a pointer to it */
    uint64_t gen;
    size_t size, klen, nmarks, blen;
    readcache_mark marks[]; /* then the key, then the body */
} entry;

struct findcache {
    readcache *rc;
    slotset set;
    size_t max_bytes;
    findcache_stats stats;
};

static const char *entry_key(const entry *e)
{
    return (const char *)(e->marks + e->nmarks);
}

static bool same_key(const slotset_head *h, const char *key, size_t klen)
{
    const entry *e = (const entry *)h;
    return e->klen == klen && memcmp(entry_key(e), key, klen) == 0;
}

static void drop(void *owner, slotset_head **slot)
{
    findcache *fc = owner;
    entry *e = (entry *)*slot;
    fc->stats.bytes -= e->size;
    fc->stats.entries--;
    free(e);
    *slot = NULL;
}

findcache *findcache_new(size_t max_bytes, readcache *rc)
{
    if (max_bytes == 0 || !rc)
        return NULL;
    findcache *fc = calloc(1, sizeof *fc);
    if (!fc)
        return NULL;
    if (slotset_init(&fc->set, max_bytes, BYTES_PER_SLOT, (size_t)1 << 22) != 0) {
        free(fc);
        return NULL;
    }
    fc->rc = rc;
    fc->max_bytes = max_bytes;
    return fc;
}

void findcache_free(findcache *fc)
{
    if (!fc)
        return;
    slotset_fini(&fc->set, drop, fc);
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

const char *findcache_get(findcache *fc, const char *key, size_t klen, size_t *body_len)
{
    if (!fc)
        return NULL;
    slotset_head **slot = slotset_find(&fc->set, slotset_hash(key, klen), key, klen, same_key);
    if (!slot) {
        fc->stats.misses++;
        return NULL;
    }
    entry *e = (entry *)*slot;
    if (!readcache_marks_current(fc->rc, e->gen, e->marks, e->nmarks)) {
        fc->stats.stale++;
        drop(fc, slot);
        return NULL;
    }
    fc->stats.hits++;
    slotset_touch(&fc->set, &e->head);
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
    uint64_t h = slotset_hash(key, klen);
    slotset_head **slot = slotset_claim(&fc->set, h, key, klen, same_key, drop, fc);
    if (!slotset_make_room(&fc->set, &fc->stats.bytes, size, fc->max_bytes, drop, fc)) {
        fc->stats.dropped++;
        return;
    }
    entry *e = malloc(size);
    if (!e) {
        fc->stats.dropped++; /* a page not kept is only a later miss */
        return;
    }
    e->head.hash = h;
    slotset_touch(&fc->set, &e->head);
    e->gen = gen;
    e->size = size;
    e->klen = klen;
    e->nmarks = nmarks;
    e->blen = blen;
    if (nmarks)
        memcpy(e->marks, marks, nmarks * sizeof *marks);
    char *at = (char *)(e->marks + nmarks);
    memcpy(at, key, klen);
    memcpy(at + klen, body, blen);
    *slot = &e->head;
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
