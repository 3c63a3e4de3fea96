/* hash: FNV-1a over bytes, for the in-process tables whose keys are short and made or checked
 * by us (ids, addresses, cache keys): a simple spread is enough, and no peer picks the keys. */
#ifndef ENTITYD_CORE_HASH_H
#define ENTITYD_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_fnv1a(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

#endif
