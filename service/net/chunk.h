/* chunk: bytes written once and sent to many sockets (an event rendered for every stream of
 * its entity): refcounted, never copied per socket. Loop thread only. */
#ifndef ENTITYD_CHUNK_H
#define ENTITYD_CHUNK_H

#include <stddef.h>
#include <stdint.h>

typedef struct out_chunk {
    uint32_t refs;
    uint32_t len;
    char data[];
} out_chunk;

/* A chunk holding a copy of data, one reference; NULL when out of memory or over 4 GiB. */
out_chunk *chunk_new(const char *data, size_t len);
static inline out_chunk *chunk_ref(out_chunk *c)
{
    c->refs++;
    return c;
}
/* Drops a reference; the last frees it. NULL is fine. */
void chunk_unref(out_chunk *c);

#endif
