/* ways: the slot array of a set-associative cache. */
#include "cache/ways.h"

#include <stdlib.h>

int ways_init(ways *w, size_t entries, size_t entry_size)
{
    *w = (ways){NULL, 0, entry_size, 0};
    if (entries == 0)
        return 0;
    size_t sets = 1;
    while (sets * WAYS_PER_SET < entries)
        sets *= 2;
    /* calloc: pages never touched cost no resident memory. */
    w->slots = calloc(sets * WAYS_PER_SET, entry_size);
    if (!w->slots)
        return -1;
    w->sets = sets;
    return 0;
}

void ways_deinit(ways *w)
{
    free(w->slots);
    w->slots = NULL;
    w->sets = 0;
}
