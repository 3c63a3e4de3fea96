/* progress: the member progression read other handlers build on (progress.c). */
#ifndef ENTITYD_PROGRESS_H
#define ENTITYD_PROGRESS_H

#include <stdbool.h>

#include "core/ids.h"
#include "http/request.h"
#include "redis/store.h"
#include "resources/progress_totals.h" /* progress_next_field */

/* The path's entity and member. */
typedef struct member_req {
    char id[IDS_SIZE];
    char addr[43];
    long limit;
} member_req;

/* Commands a handler may add after the read's own (in the same transaction). */
#define PROGRESS_READ_EXTRA_MAX 2

/* Sends the progression read of the path's entity and member in one transaction, through the
 * read cache under the route's letter: progress.lua, the caller's role lookups, then `extra`
 * (keys of the same entity). Fills m (the caller's, kept until cb runs) from the path.
 * Answers itself and returns false when the path names no entity or member (404). cb may run
 * before this returns (a read cache hit). */
bool progress_read_send(request *req, char letter, const store_cmd *extra, int nextra, store_cb cb,
                        member_req *m);

/* Checks the reply of that read: answers a failure, a refusal (the read rule, or the member
 * themself) or an unknown member and returns NULL; otherwise progress.lua's reply, {id,
 * isEnabled, public, known, prog hash as a flat array, rank, progression template}. The extra
 * commands' replies follow the role lookups in r. */
const redisReply *progress_read_check(request *req, int status, redisReply *r, int nextra,
                                      const member_req *m);

#endif
