/* arena: request-scoped memory, released in one go when the response is done. */
#ifndef ENTITYD_ARENA_H
#define ENTITYD_ARENA_H

#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
    arena_chunk *head;
} arena;

#define ARENA_INIT                                                                                 \
    {                                                                                              \
        NULL                                                                                       \
    }

/* Returns zeroed memory owned by the arena (valid until arena_reset), or NULL. */
void *arena_alloc(arena *a, size_t size);
/* Copies len bytes and adds a NUL; NULL on allocation failure. */
char *arena_strndup(arena *a, const char *s, size_t len);
/* Frees everything the arena handed out. */
void arena_reset(arena *a);

#endif
