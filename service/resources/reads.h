/* reads: what the progression reads share (progress.c, leaderboard.c, events.c): query
 * parameters, a read's key in the read cache, the access check of a transaction's reply, and
 * numbers rendered without printf. */
#ifndef ENTITYD_READS_H
#define ENTITYD_READS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resources/entity.h"
#include "core/buf.h"
#include "http/request.h"

/* Whether the caller is a platform admin. */
bool reads_is_platform(request *req);

/* The event log's gate (events.c, events_stream.c): r is the gate's answer, {HMGET id
 * isEnabled public, SISMEMBER owners, SISMEMBER admins, HEXISTS members, the log's read}, the
 * read there only where the caller may read the events (owners and admins, or a platform
 * admin). True when it may; otherwise answered (what names the route in a malformed reply's
 * log line). */
bool reads_events_gate(request *req, const struct redisReply *r, const char *what);

/* n > 0 bytes, all decimal digits. */
bool reads_all_digits(const char *s, size_t n);

/* n bytes, all lowercase hex digits. */
bool reads_lower_hex(const char *s, size_t n);

/* Reads the optional query parameter `limit` (1..max, default def) into *out, or answers 400
 * and returns false. */
bool reads_limit(request *req, long max, long def, long *out);

/* A progression read's key in the read cache (store_read_exec_as): the route's letter, then
 * every input its commands are built from (at most six, each at most 64 bytes: checked ids,
 * addresses, a board entry, a limit, a cursor's counts), each after its length, so that no two
 * inputs run together. A hit then costs a lookup of about a hundred bytes, not of the framed
 * transaction; the caller's role still comes from the kept answer of this caller's own lookups. */
typedef struct reads_desc {
    size_t len;
    char s[1 + 6 * (1 + 64)];
} reads_desc;

void reads_desc_add(reads_desc *d, const char *s, size_t len);

/* Checks a read's EXEC reply: {the read's first reply, the role lookups, the rest}, nreplies
 * in all, the first an array of at least `min` whose first three are {id, isEnabled, public}.
 * Then the read rule over them and the caller's role, or, where `self`, the member themself on
 * an enabled entity. Answers a failure or a refusal itself (ENTITY_READ_ANSWERED). */
entity_read reads_reply(request *req, int status, const redisReply *r, size_t nreplies, size_t min,
                        bool self);

/* A signed integer, without printf: these reads render dozens of numbers per answer. */
void reads_append_int(buf *b, int64_t v);

#endif
