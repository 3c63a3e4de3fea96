/* joinrules_join: checking an address against an entity's join rule, and joining by it
 * (CONTRACT section 16). Both ask who is calling first (CONTRACT section 12: write_check.lua),
 * then read the rule, then evaluate it (jobs/joineval.h); a check's answer is kept per (entity,
 * address) for JOIN_CHECK_CACHE_MS in the process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/joinrule_eval.h"
#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "core/app.h"
#include "core/buf.h"
#include "core/isotime.h"
#include "crypto/hex.h"
#include "jobs/indexes.h"
#include "jobs/joineval.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/findindex.h"
#include "resources/handlers.h"

/* One check or join, in the request's pool. */
typedef struct join_req {
    char id[IDS_SIZE];
    char addr[43]; /* the address checked (the caller's, for a join) */
    bool join;
    char ver[24]; /* the rule's ver judged by */
    joinrule r;
    joineval_rule er;
    findindex_added added;
    int64_t due_ms;
} join_req;

/* ---- the check's answers, kept per (entity, address) ---- */

#define CHECK_CACHE_SLOTS 1024
typedef struct check_entry {
    char key[IDS_SIZE + 43];
    int64_t until_ms;
    char *body; /* malloc */
    size_t len;
} check_entry;
static check_entry check_cache[CHECK_CACHE_SLOTS];

static check_entry *check_slot(const join_req *j, char key[IDS_SIZE + 43])
{
    snprintf(key, IDS_SIZE + 43, "%s%s", j->id, j->addr);
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    return &check_cache[h % CHECK_CACHE_SLOTS];
}

/* ---- rendering ---- */

static void put_str_or_null(buf *b, const char *s)
{
    if (!s || !*s) {
        buf_append_str(b, "null");
        return;
    }
    buf_append(b, "\"", 1);
    buf_append_json_escaped(b, s, strlen(s));
    buf_append(b, "\"", 1);
}

/* The leaves of an answer for address 0, as CONTRACT section 16 gives them; only the failing
 * and erring ones when failing_only. */
static void render_leaves(buf *b, const join_req *j, const joineval_answer *a, bool failing_only)
{
    buf_append(b, "[", 1);
    bool first = true;
    for (int i = 0; i < a->nleaves; i++) {
        const joineval_value *v = &a->v[i];
        if (failing_only && v->truth == JOINEVAL_TRUE)
            continue;
        if (!first)
            buf_append(b, ",", 1);
        first = false;
        buf_append_str(b, "{\"path\":");
        put_str_or_null(b, j->r.node[j->r.leaf_node[i]].path);
        if (v->truth == JOINEVAL_ERROR) {
            buf_append_str(b, ",\"error\":");
            put_str_or_null(b, v->error ? v->error : "This leaf could not be read.");
        } else {
            buf_append_str(b, v->truth == JOINEVAL_TRUE ? ",\"ok\":true" : ",\"ok\":false");
            buf_append_str(b, ",\"have\":");
            put_str_or_null(b, v->have);
            buf_append_str(b, ",\"need\":");
            put_str_or_null(b, joineval_need(&j->er, i));
        }
        buf_append(b, "}", 1);
    }
    buf_append(b, "]", 1);
}

static void render_check(buf *b, const join_req *j, const joineval_answer *a)
{
    int v = a->verdict[0];
    buf_append_str(b, "{\"success\":true,\"data\":{\"eligible\":");
    buf_append_str(b, v == JOINEVAL_TRUE ? "true" : v == JOINEVAL_FALSE ? "false" : "null");
    buf_append_str(b, ",\"blocks\":{");
    for (int c = 0; c < a->nchains; c++) {
        char n[64];
        snprintf(n, sizeof n, "%s\"%llu\":%llu", c ? "," : "", (unsigned long long)a->chain[c],
                 (unsigned long long)a->block[c]);
        buf_append_str(b, n);
    }
    buf_append_str(b, "},\"leaves\":");
    render_leaves(b, j, a, false);
    buf_append_str(b, "}}");
}

/* ---- joining ---- */

static void join_answer(request *req, long long joined)
{
    json_t *out = respond_ok();
    json_object_set_new(out, "joined", json_integer(joined));
    request_reply(req, 200, out);
}

static void on_listed(void *data, int status, redisReply *r)
{
    (void)status;
    (void)r; /* the join happened: a registry entry that failed is found by the re-check's
              * next listing of this entity's next join, and the member stays one */
    join_answer(data, 1);
}

/* join_add.lua answers {joined, board...}. */
static void on_joined(void *data, int status, redisReply *r)
{
    request *req = data;
    join_req *j = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR) {
        findindex_refuse(req, &j->added, r);
        return;
    }
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "join_add: unexpected reply");
        return;
    }
    entity_drop_boards(req, j->id, r, 1);
    if (r->element[0]->integer != 1) {
        join_answer(req, 0);
        return;
    }
    /* The re-check finds the entity in its registry (its own slot): a separate command. */
    char due[24];
    snprintf(due, sizeof due, "%lld", (long long)j->due_ms);
    const char *argv[] = {"ZADD", KEYS_JOINS, "LT", due, j->id};
    size_t lens[] = {4, strlen(KEYS_JOINS), 2, strlen(due), strlen(j->id)};
    store_command(req->app->store, on_listed, req, 5, argv, lens);
}

static void join_write(request *req, int status)
{
    join_req *j = req->state;
    if (status != STORE_OK) {
        respond_store_failed(req, status, NULL);
        return;
    }
    entity_keys k;
    keys_entity(&k, j->id);
    char join[KEYS_ENTITY_SIZE], due_key[KEYS_ENTITY_SIZE];
    keys_join(join, j->id, "");
    keys_join(due_key, j->id, ":due");
    int64_t now = isotime_now_ms();
    j->due_ms = now + req->app->cfg.join_recheck_seconds * 1000;
    char added_at[24], version[17], due[24], most[24];
    snprintf(added_at, sizeof added_at, "%016lld", (long long)now);
    snprintf(due, sizeof due, "%lld", (long long)j->due_ms);
    snprintf(most, sizeof most, "%lld", (long long)req->app->cfg.max_members_per_entity);
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness for the members version");
        return;
    }
    hex_encode(rnd, sizeof rnd, version);
    entity_event_args ev;
    entity_event_args_fill(req, now, &ev);
    const char *argv[] = {
        k.entity,  k.owners,    k.admins,
        k.members, k.order,     join,
        due_key,   req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        added_at,  version,     ev.max,
        ev.at,     j->ver,      due,
        most,      j->addr};
    size_t lens[17];
    for (int i = 0; i < 17; i++)
        lens[i] = strlen(argv[i]);
    store_script(req->app->store, LUA_JOIN_ADD, on_joined, req, 7, 17, argv, lens);
}

/* A join refused: 403 with the failing leaves in error.details. */
static void join_refuse(request *req, const join_req *j, const joineval_answer *a)
{
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":false,\"error\":{\"code\":\"forbidden\",\"message\":\"You do "
                      "not meet this entity's join rule.\",\"details\":");
    render_leaves(b, j, a, true);
    buf_append_str(b, "}}");
    respond_send(req, 403, b);
}

static void on_evaluated(void *data, const joineval_answer *a)
{
    request *req = data;
    join_req *j = req->state;
    int v = a->verdict[0];
    if (v == JOINEVAL_ERROR && j->join) {
        long long wait = a->retry_after > 0 ? a->retry_after : 1;
        request_fail_retry(req, 503, "unavailable",
                           "The join rule could not be judged now (a chain or Redis did not "
                           "answer); try again.",
                           wait);
        return;
    }
    if (!j->join) {
        buf *b = respond_scratch();
        render_check(b, j, a);
        int64_t ttl = req->app->cfg.join_check_cache_ms;
        /* an erring answer is not kept: the next check may find the chain back */
        if (ttl > 0 && v != JOINEVAL_ERROR) {
            char key[IDS_SIZE + 43];
            check_entry *e = check_slot(j, key);
            char *copy = malloc(b->len);
            if (copy) {
                memcpy(copy, b->data, b->len);
                free(e->body);
                memcpy(e->key, key, sizeof e->key);
                e->body = copy;
                e->len = b->len;
                e->until_ms = isotime_now_ms() + ttl;
            }
        }
        respond_send(req, 200, b);
        return;
    }
    if (v == JOINEVAL_FALSE) {
        join_refuse(req, j, a);
        return;
    }
    /* Add-before (findindex.h): the caller's wallet lists the entity ahead of the write. */
    findindex_add(req, j->id, (const char(*)[43])j->addr, 1, INDEXES_MEMBER, 0, NULL, 0, &j->added,
                  join_write);
}

/* HMGET join rule updatedBy ver. */
static void on_rule(void *data, int status, redisReply *r)
{
    request *req = data;
    join_req *j = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "join rule: unexpected reply"))
        return;
    if (r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING) {
        request_fail(req, 404, "not_found", "This entity has no join rule.", NULL);
        return;
    }
    snprintf(j->ver, sizeof j->ver, "%.*s",
             r->element[2]->type == REDIS_REPLY_STRING ? (int)r->element[2]->len : 0,
             r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "");
    char author[43];
    snprintf(author, sizeof author, "%.*s", (int)r->element[1]->len, r->element[1]->str);
    if (joinrule_eval_parse(r->element[0]->str, r->element[0]->len, &j->r) != 0) {
        request_fail_internal(req, "join rule: the stored rule does not parse");
        return;
    }
    joinrule_eval_fill(&j->r, author, auth_is_platform_admin(req->app->auth, author), &j->er);
    if (joineval_start(req->app->loop, req->app->store, req->app->joinread, &j->er,
                       (const char(*)[43])j->addr, 1, false, on_evaluated, req) != 0)
        request_fail_internal(req, "join rule: the evaluation could not start");
}

static void read_rule(request *req)
{
    join_req *j = req->state;
    char join[KEYS_ENTITY_SIZE];
    keys_join(join, j->id, "");
    const char *argv[] = {"HMGET", join, "rule", "updatedBy", "ver"};
    size_t lens[] = {5, strlen(join), 4, 9, 3};
    store_command(req->app->store, on_rule, req, 5, argv, lens);
}

static void on_check_gate(request *req, const redisReply *r)
{
    (void)r;
    join_req *j = req->state;
    char key[IDS_SIZE + 43];
    const check_entry *e = check_slot(j, key);
    if (e->body && strcmp(e->key, key) == 0 && e->until_ms > isotime_now_ms()) {
        slice part = {e->body, e->len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    read_rule(req);
}

static void on_join_gate(request *req, const redisReply *r)
{
    /* {name, 1 when the caller is a member already} */
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer == 1) {
        join_answer(req, 0);
        return;
    }
    read_rule(req);
}

void joinrules_check(request *req)
{
    join_req *j = request_state(req, sizeof *j);
    if (!j || !entity_path_id(req, j->id))
        return;
    size_t len;
    const char *f = request_param(req, "for", &len);
    verr e;
    if (!f || validate_address(f, len, "for", j->addr, &e) != 0) {
        request_fail_field(req, "for", "for must be an address (0x and 40 hex digits).");
        return;
    }
    j->join = false;
    /* Asked first (CONTRACT section 12): a signed caller for its own address, owners and
     * admins for any. */
    entity_check(req, j->id, strcmp(j->addr, req->caller) == 0 ? "leave" : "staff", "", NULL, 0,
                 on_check_gate);
}

void joinrules_join(request *req)
{
    join_req *j = request_state(req, sizeof *j);
    if (!j || !entity_path_id(req, j->id))
        return;
    snprintf(j->addr, sizeof j->addr, "%s", req->caller);
    j->join = true;
    entity_check(req, j->id, "leave", INDEXES_MEMBER, (const char(*)[43])j->addr, 1, on_join_gate);
}
