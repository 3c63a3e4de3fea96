/* redis_reply: hiredis reply objects built in blocks, one chain per top-level reply. */
#ifndef ENTITYD_REDIS_REPLY_H
#define ENTITYD_REDIS_REPLY_H

#include <hiredis/read.h>

/* Reply functions for a hiredis reader (reader->fn). The replies they build are ordinary
 * redisReply trees, but only a top-level reply may be freed, and only through these functions'
 * freeObject (hiredis's own freeReplyObject must not see them). Loop thread only. */
extern redisReplyObjectFunctions redis_reply_functions;

/* Frees the blocks kept for reuse (at exit, so that leak checkers see a clean heap). */
void redis_reply_release_cache(void);

#endif
