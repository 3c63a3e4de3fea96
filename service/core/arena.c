/* arena: a bump allocator over a list of chunks. */
#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct arena_chunk {
    arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

#define CHUNK_MIN 4000
/* Standard chunks are kept for the next request rather than freed: one malloc/free pair per
 * request otherwise (and glibc consolidating its heap for chunks this size). Loop thread only. */
#define CACHE_MAX 64
static arena_chunk *cache;
static int cached;

void *arena_alloc(arena *a, size_t size)
{
    if (size > SIZE_MAX / 2)
        return NULL; /* no request needs it, and rounding up must not wrap */
    size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
        if (cap == CHUNK_MIN && cache) {
            c = cache;
            cache = c->next;
            cached--;
        } else if (!(c = malloc(sizeof *c + cap))) {
            return NULL;
        }
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t len)
{
    char *p = arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void arena_reset(arena *a)
{
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        if (c->cap == CHUNK_MIN && cached < CACHE_MAX) {
            c->next = cache;
            cache = c;
            cached++;
        } else {
            free(c);
        }
        c = next;
    }
    a->head = NULL;
}
