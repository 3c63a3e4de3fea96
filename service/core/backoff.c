/* backoff: see backoff.h. */
#include "core/backoff.h"

void backoff_init(backoff *b, unsigned min_ms, unsigned max_ms)
{
    b->min_ms = min_ms;
    b->max_ms = max_ms;
    b->next_ms = min_ms;
}

unsigned backoff_next(backoff *b)
{
    unsigned delay = b->next_ms;
    b->next_ms = b->next_ms * 2 > b->max_ms ? b->max_ms : b->next_ms * 2;
    return delay;
}

void backoff_reset(backoff *b)
{
    b->next_ms = b->min_ms;
}
