/* chunk: see chunk.h. */
#include "net/chunk.h"

#include <stdlib.h>
#include <string.h>

out_chunk *chunk_new(const char *data, size_t len)
{
    if (len > UINT32_MAX)
        return NULL;
    out_chunk *c = malloc(sizeof *c + len);
    if (!c)
        return NULL;
    c->refs = 1;
    c->len = (uint32_t)len;
    memcpy(c->data, data, len);
    return c;
}

void chunk_unref(out_chunk *c)
{
    if (c && --c->refs == 0)
        free(c);
}
