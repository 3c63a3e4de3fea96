/* pagecache: see pagecache.h. Each entry is one allocation: the header, then key, version and
 * body back to back; the slot owns it. */
#include "cache/pagecache.h"

#include "core/hash.h"
#include "core/metrics.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    size_t klen, vlen, blen;
    char data[]; /* key, version, body */
} entry;

struct pagecache {
    entry **slots;
    size_t nslots, max_body;
    pagecache_stats stats;
};

pagecache *pagecache_new(size_t slots, size_t max_body)
{
    if (slots == 0)
        return NULL;
    pagecache *pc = calloc(1, sizeof *pc);
    if (!pc)
        return NULL;
    pc->slots = calloc(slots, sizeof *pc->slots);
    if (!pc->slots) {
        free(pc);
        return NULL;
    }
    pc->nslots = slots;
    pc->max_body = max_body;
    return pc;
}

void pagecache_free(pagecache *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < pc->nslots; i++)
        free(pc->slots[i]);
    free(pc->slots);
    free(pc);
}

static size_t pagecache_slot(const pagecache *pc, const char *key, size_t klen)
{
    return (size_t)(hash_fnv1a(key, klen) % pc->nslots);
}

static entry *find(const pagecache *pc, const char *key, size_t klen)
{
    entry *e = pc->slots[pagecache_slot(pc, key, klen)];
    return e && e->klen == klen && memcmp(e->data, key, klen) == 0 ? e : NULL;
}

const char *pagecache_get(pagecache *pc, const char *key, size_t klen, const char *version,
                          size_t vlen, size_t *body_len)
{
    if (!pc)
        return NULL;
    entry *e = find(pc, key, klen);
    if (!e) {
        pc->stats.misses++;
        return NULL;
    }
    if (e->vlen != vlen || memcmp(e->data + klen, version, vlen) != 0) {
        pc->stats.stale++;
        return NULL;
    }
    pc->stats.hits++;
    *body_len = e->blen;
    return e->data + klen + vlen;
}

bool pagecache_lookup(pagecache *pc, const char *key, size_t klen)
{
    if (!pc)
        return false;
    if (find(pc, key, klen))
        return true;
    pc->stats.misses++;
    return false;
}

void pagecache_put(pagecache *pc, const char *key, size_t klen, const char *version, size_t vlen,
                   const char *body, size_t blen)
{
    if (!pc || blen > pc->max_body)
        return;
    entry *e = malloc(sizeof *e + klen + vlen + blen);
    if (!e)
        return; /* a page not kept is only a later miss */
    e->klen = klen;
    e->vlen = vlen;
    e->blen = blen;
    memcpy(e->data, key, klen);
    memcpy(e->data + klen, version, vlen);
    memcpy(e->data + klen + vlen, body, blen);
    entry **slot = &pc->slots[pagecache_slot(pc, key, klen)];
    free(*slot);
    *slot = e;
    pc->stats.stored++;
}

pagecache_stats pagecache_get_stats(const pagecache *pc)
{
    pagecache_stats none = {0};
    return pc ? pc->stats : none;
}

void pagecache_render_metrics(buf *out, void *ctx)
{
    pagecache_stats ps = pagecache_get_stats(ctx);
    metrics_family(out, "entityd_users_page_cache_total", "counter",
                   "Users page reads by cache outcome.");
    buf_printf(out,
               "entityd_users_page_cache_total{outcome=\"hit\"} %llu\n"
               "entityd_users_page_cache_total{outcome=\"miss\"} %llu\n"
               "entityd_users_page_cache_total{outcome=\"stale\"} %llu\n",
               (unsigned long long)ps.hits, (unsigned long long)ps.misses,
               (unsigned long long)ps.stale);
}
