/* loop: running a test's own libuv loop to an end. */
#ifndef ENTITYD_TEST_LOOP_H
#define ENTITYD_TEST_LOOP_H

#include <stdbool.h>

#include <uv.h>

/* Runs loop (one turn a millisecond) until no handle is left or ms pass; returns whether none
 * is left. */
bool loop_drain(uv_loop_t *loop, int ms);

#endif
