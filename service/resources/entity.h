/* entity: the Entity resource's fields, its JSON shape, body validation and the read rule. */
#ifndef ENTITYD_ENTITY_H
#define ENTITYD_ENTITY_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "http/request.h"
#include "redis/store.h"
#include "api/validate.h"

/* What a create-or-update body asks for, validated. Views point into the body JSON. */
typedef struct entity_input {
    json_t *fields;     /* stored name -> string value, only what the body gives */
    char (*owners)[43]; /* deduplicated lowercase owners */
    size_t nowners;
    bool has_alias;
    char alias[65]; /* "" clears */
    bool has_enabled, enabled;
    bool has_v;
    int64_t v;
    bool has_id;
    char id[40];
} entity_input;

/* Validates a create-or-update body (CONTRACT §3.2). On error fills e and returns -1. `fields`
 * is a new reference the caller releases. */
int entity_parse_input(request *req, json_t *body, entity_input *in, verr *e);
/* Adds the defaults of a new entity to in->fields for every field the body left out. */
void entity_fill_defaults(entity_input *in);

enum entity_role { ROLE_NONE = 0, ROLE_MEMBER, ROLE_ADMIN, ROLE_OWNER };

/* The opening of a write with a JSON body on /api/entities/{id}/…: the entity id from the
 * path, the request's state of `size` bytes (request_state) and the body; NULL when one of
 * them has answered the request, else the state. */
void *entity_write_open(request *req, char id[IDS_SIZE], size_t size, json_t **body);
/* Copies the path's entity id (first path parameter) into out, or answers 404 and returns
 * false: a malformed id in a path names nothing. */
bool entity_path_id(request *req, char out[IDS_SIZE]);
/* The same for a path that names a part of the entity in its second parameter: kind 's' a
 * skill (part: IDS_SIZE bytes), 'l' a level (part: ENTITY_LEVEL_ID_SIZE bytes). Answers 404
 * when either id is malformed. */
#define ENTITY_LEVEL_ID_SIZE 65
bool entity_path_part(request *req, char eid[IDS_SIZE], char kind, char *part);

/* What a route that adds addresses to an entity names: the path's entity id and the body's
 * required "addresses" (in the request's pool). */
typedef struct entity_addresses {
    char id[IDS_SIZE];
    char (*list)[43];
    size_t n;
} entity_addresses;

/* Reads the entity id and 1 to max addresses into out. Returns the body, which the caller
 * releases, or NULL once the request is answered (404, 400). */
json_t *entity_addresses_body(request *req, size_t max, entity_addresses *out);

/* Runs a script whose arguments are head (its nkeys keys first) then the addresses, the list
 * a write names: the argument vector is built in the request's pool, so its length follows the
 * list. Out of memory answers 500 instead. */
void entity_script(request *req, int script, store_cb cb, int nkeys, const char *const *head,
                   size_t nhead, const char (*addrs)[43], size_t naddrs);
/* The same as one call of a group (redis/group.h): head's first nshared_keys keys and the
 * nshared_args arguments after them are the group's shared part, the rest is the call's own
 * (no keys of its own). */
void entity_group_script(request *req, int script, store_cb cb, int nshared_keys, int nshared_args,
                         const char *const *head, size_t nhead, const char (*addrs)[43],
                         size_t naddrs);

/* The read-only gate asked before anything is written ahead of a write script (CONTRACT §12,
 * write_check.lua): who is "owners", "staff" or "leave" (as the script's own gate), role the
 * letter the addresses take ("o", "a", "m"; "" none). A refusal or a failure is answered here;
 * otherwise done gets {the entity's name, per address 1 if it holds that role already}, valid
 * during the call only. */
typedef void (*entity_check_done)(request *req, const redisReply *r);
void entity_check(request *req, const char *id, const char *who, const char *role,
                  const char (*addrs)[43], size_t naddrs, entity_check_done done);
/* The addresses of a check's answer r that do not hold the role yet (held false: only they
 * get index entries ahead), or those that do (held true), in the request's pool. *out is NULL
 * when out of memory (naddrs > 0). */
size_t entity_check_split(request *req, const redisReply *r, const char (*addrs)[43], size_t naddrs,
                          bool held, char (**out)[43]);

/* A write script changed these boards of the entity (reply elements from `from` on: "xp" or
 * skill ids), known only from its answer: the read cache drops them now, so that this
 * instance's next read is not older than the write (other instances hear it from Redis). */
void entity_drop_boards(request *req, const char *entity_id, const redisReply *r, size_t from);

/* The two arguments every write script that records an event takes (keys.h, events):
 * "<EVENTS_MAX>:<EVENTS_MAX_BYTES>[:<apiKeyId>]" (lua/_prelude.lua, emit: the events of a
 * request an entity API key signed in add its id) and the time of the change. */
typedef struct entity_event_args {
    char max[80];
    char at[ISOTIME_STRING_SIZE];
} entity_event_args;

/* Fills a with the events' limits and the time now_ms as ISO 8601. */
void entity_event_args_fill(const request *req, int64_t now_ms, entity_event_args *a);

/* What every write script of an entity takes beside its own arguments: the entity's keys
 * (keys.h) and the events' arguments of a write at one time. */
typedef struct entity_write {
    entity_keys k;
    entity_event_args ev;
} entity_write;

/* Fills w for the entity `id` and a write at now_ms. */
void entity_write_fill(const request *req, const char *id, int64_t now_ms, entity_write *w);

/* How a read's answer came out: refused or failed (already answered), allowed, or not yet
 * decidable because the caller's role decides and was not asked for. */
typedef enum entity_read {
    ENTITY_READ_ANSWERED = 0,
    ENTITY_READ_OK,
    ENTITY_READ_ASK_ROLES,
} entity_read;

/* Reads go out first without the caller's role: a public, enabled entity is open to anyone
 * signed in (and, for GET of an entity, to anyone), so most reads need no role, and a read
 * that does (a private or disabled entity, a signed caller) is sent again with the role
 * lookups. Each answer still comes from one atomic read. */

/* Checks a plain HMGET's answer, {payload, isEnabled, public, ...}, taken without the role.
 * Answers 503/504, 404 (unknown entity) or a refusal no role could lift itself. */
entity_read entity_read_fields(request *req, int status, redisReply *r, bool unsigned_ok);

/* A read with more than the entity hash is one transaction: MULTI, an HMGET of the entity hash
 * whose first three fields are <a field every entity has>, isEnabled, public, then the
 * caller's role lookups (these three plain commands) when asked for, then whatever else the
 * read needs, and EXEC. Plain commands where nothing large follows (a users page's version
 * check): Redis runs them for a fraction of a Lua call's cost. Where the caller's right
 * decides whether a page, a skill tree or an event log is read, the same transaction is one
 * gated read instead (entity_gate below). */
#define ENTITY_ROLE_CMDS 3
typedef struct entity_role_lookup {
    const char *argv[ENTITY_ROLE_CMDS][3];
    size_t lens[ENTITY_ROLE_CMDS][3];
} entity_role_lookup;

/* Fills out[0..2] with SISMEMBER owners, SISMEMBER admins and HEXISTS members for the caller;
 * l holds their arguments and k the keys, both until the commands are sent. */
void entity_role_cmds(entity_role_lookup *l, const entity_keys *k, const char *caller,
                      store_cmd out[ENTITY_ROLE_CMDS]);

/* Sends a read of the entity hash, the HMGET argv: alone (its answer goes to `alone`, for
 * entity_read_fields), or as a gated read (entity_gate, rule 'r') with the caller's role lookups
 * (`with_roles`, for entity_read_gated). Either way with a deferred revocation check. */
void entity_read_send(request *req, const entity_keys *k, int argc, const char **argv,
                      const size_t *lens, bool roles, store_cb alone, store_cb with_roles);
/* Checks a gated read's reply (entity_read_send with the roles): as entity_read_exec of
 * {HMGET, the role lookups}. */
entity_read entity_read_gated(request *req, int status, redisReply *r, bool unsigned_ok,
                              const redisReply **fields);

/* Checks such a transaction's EXEC reply: nreplies replies, the HMGET, nroles (0 or
 * ENTITY_ROLE_CMDS) role lookups, the rest. Sets *fields to the HMGET's reply unless the
 * answer is ENTITY_READ_ANSWERED. */
entity_read entity_read_exec(request *req, int status, redisReply *r, size_t nreplies, int nroles,
                             bool unsigned_ok, const redisReply **fields);

/* A read that answers only a caller who may read it (CONTRACT §12): read_gate.lua checks the
 * entity's flags and the caller's role and runs the read's own commands only when they allow,
 * so a refusal costs Redis the role lookups alone, whatever lies behind them. Still one round
 * trip: the script is the one command of the transaction it is sent in (store_exec, or
 * store_read_exec* through the read cache, which follows its declared keys). Its answer has the
 * shape of the transaction it replaces, {HMGET, the role lookups, each command's reply}, or,
 * refused, only {the first three fields, the role lookups} (entity_read_exec, reads_reply). */
#define ENTITY_GATE_KEYS 10
#define ENTITY_GATE_ARGS 64
typedef struct entity_gate {
    const char *argv[3 + ENTITY_GATE_KEYS + ENTITY_GATE_ARGS];
    size_t lens[3 + ENTITY_GATE_KEYS + ENTITY_GATE_ARGS];
    const char *keys[ENTITY_GATE_KEYS], *args[ENTITY_GATE_ARGS];
    size_t klens[ENTITY_GATE_KEYS], alens[ENTITY_GATE_ARGS];
    int nkeys, nargs;
    char nums[ENTITY_GATE_ARGS][4]; /* the small numbers among the arguments */
    int nnums;
    bool overflow;
} entity_gate;

/* Starts a gated read of the entity k (which must outlive the send) by the request's signed
 * caller under `rule` ('r' the read rule or 'e' owners and admins: read_gate.lua), reading the
 * n fields of its hash (the HMGET's arguments after the key; the first three <a field every
 * entity has>, isEnabled, public). */
void entity_gate_init(entity_gate *g, request *req, const entity_keys *k, char rule, int n,
                      const char *const *fields, const size_t *lens);
/* Adds a read command (its argv[1] a key of the entity's slot); its arguments must outlive the
 * send. */
void entity_gate_add(entity_gate *g, const store_cmd *c);
/* The EVALSHA command; false (500 answered) when the read is larger than the builder. */
bool entity_gate_cmd(entity_gate *g, request *req, store_cmd *out);
/* The gate's answer out of its transaction's EXEC reply, or NULL once the request is answered
 * (503/504, or a script error such as NOSCRIPT after a flush). */
const redisReply *entity_gate_reply(request *req, int status, const redisReply *r);

/* A stored flag ("0" false, anything else or absent true). */
bool entity_flag(const redisReply *r);
/* Splits a stored Entity JSON into the parts the API returns: records rendered by earlier
 * releases carry a "createdBy" member the Entity does not have (CONTRACT §3.1), cut here until
 * the entity's next write renders it again. Returns the number of parts (1 or 2). */
size_t entity_json_parts(const char *json, size_t len, slice out[2]);

/* The contract's read rule. Returns 0 when reading is allowed, else the HTTP status (401, 403,
 * 404) to answer with. `unsigned_ok`: a public, enabled entity may be read without sign-in. */
int entity_read_rule(bool enabled, bool is_public, int role, bool platform, bool signed_in,
                     bool unsigned_ok);
/* Answers the status entity_read_rule chose. */
void entity_fail_read(request *req, int status);

#endif
