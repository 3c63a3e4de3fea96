/* backoff: the wait before each reconnect attempt, doubling from a floor to a ceiling while
 * attempts fail, so a Redis that is down is not hammered and one that comes back is found soon. */
#ifndef ENTITYD_BACKOFF_H
#define ENTITYD_BACKOFF_H

typedef struct backoff {
    unsigned min_ms, max_ms;
    unsigned next_ms; /* the wait the next attempt gets */
} backoff;

void backoff_init(backoff *b, unsigned min_ms, unsigned max_ms);
/* The wait before the next attempt; the one after it is twice as long, up to max_ms. */
unsigned backoff_next(backoff *b);
/* The connection is up: the next failure waits min_ms again. */
void backoff_reset(backoff *b);

#endif
