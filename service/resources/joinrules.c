/* joinrules: an entity's join rule (CONTRACT section 16): set, read and deleted by its owners
 * and admins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/joinrule.h"
#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "core/app.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/reads.h"
#include "rpc/joinread.h"

/* A token or native leaf on a chain without a URL (ETH_RPC_URLS) is refused. */
static bool chain_known(void *ctx, uint64_t chain)
{
    return ctx && joinread_chain_known(ctx, chain);
}

/* A set's parsed request, across its gate, the reads of the entities its leaves name, and its
 * write. */
typedef struct rule_set {
    char id[IDS_SIZE];
    joinrule r;
    char *json; /* rendered (malloc), freed on reset */
    struct named {
        request *req;
        char entity[IDS_SIZE];
        int leaf; /* the first leaf naming it */
        bool readable;
    } named[JOINRULE_MAX_LEAVES];
    int nnamed, pending;
} rule_set;

static void rule_set_reset(void *data)
{
    rule_set *st = data;
    free(st->json);
    st->json = NULL;
}

static void on_set(void *data, int status, redisReply *r)
{
    request *req = data;
    rule_set *st = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        request_fail_internal(req, "join_rule_set: unexpected reply");
        return;
    }
    json_t *rule = json_loads(st->json, 0, NULL);
    json_t *data_obj = json_object();
    json_object_set_new(data_obj, "rule", rule);
    json_object_set_new(data_obj, "updatedAt", respond_string(r->element[0]));
    json_object_set_new(data_obj, "updatedBy", respond_string(r->element[1]));
    json_t *out = respond_ok();
    json_object_set_new(out, "data", data_obj);
    request_reply(req, 200, out);
}

static void send_set(request *req)
{
    rule_set *st = req->state;
    entity_write w;
    entity_write_fill(req, st->id, isotime_now_ms(), &w);
    char join[KEYS_ENTITY_SIZE];
    keys_join(join, st->id, "");
    const char *argv[] = {
        w.k.entity, w.k.owners,  w.k.admins,
        join,       req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        st->json,   w.ev.at,     w.ev.max};
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = strlen(argv[i]);
    store_script(req->app->store, LUA_JOIN_RULE_SET, on_set, req, 4, 9, argv, lens);
}

static void send_named(request *req, struct named *n);

/* join_facts.lua with no address: {1} when the author may read the entity, {0} otherwise.
 * The entities are read one after the other (each in its own slot), so a failure answers once. */
static void on_named(void *data, int status, redisReply *r)
{
    struct named *n = data;
    request *req = n->req;
    rule_set *st = req->state;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        if (!respond_store_failed(req, status, r))
            request_fail_internal(req, "join_facts: unexpected reply");
        return;
    }
    n->readable = r->element[0]->integer == 1;
    if (++st->pending < st->nnamed) {
        send_named(req, &st->named[st->pending]);
        return;
    }
    /* the first leaf, in the rule's order, naming an entity its author may not read */
    int bad = -1;
    for (int i = 0; i < st->nnamed; i++)
        if (!st->named[i].readable && (bad < 0 || st->named[i].leaf < bad))
            bad = st->named[i].leaf;
    if (bad >= 0) {
        const jr_node *node = &st->r.node[st->r.leaf_node[bad]];
        char field[128];
        snprintf(field, sizeof field, "%s.%s.entityID", node->path,
                 node->kind == JR_LEVEL ? "level" : "role");
        request_fail_field(req, field,
                           "A level or role leaf may name only an entity you may read.");
        return;
    }
    send_set(req);
}

static void send_named(request *req, struct named *n)
{
    entity_keys k;
    keys_entity(&k, n->entity);
    char gen[KEYS_ENTITY_SIZE + 16];
    snprintf(gen, sizeof gen, "%s:levels:gen", k.entity);
    const char *argv[] = {k.entity,
                          k.owners,
                          k.admins,
                          k.members,
                          gen,
                          req->caller,
                          auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                          "0",
                          "0"};
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = strlen(argv[i]);
    store_script_read(req->app->store, 0, LUA_JOIN_FACTS, on_named, n, 5, 9, argv, lens);
}

/* Past the gate: the entities the level and role leaves name. */
static void on_set_gate(request *req, const redisReply *r)
{
    (void)r;
    rule_set *st = req->state;
    for (int i = 0; i < st->r.leaves; i++) {
        const jr_node *node = &st->r.node[st->r.leaf_node[i]];
        if (node->kind != JR_LEVEL && node->kind != JR_ROLE)
            continue;
        int j = 0;
        while (j < st->nnamed && strcmp(st->named[j].entity, node->entity) != 0)
            j++;
        if (j == st->nnamed) {
            st->named[j].req = req;
            memcpy(st->named[j].entity, node->entity, IDS_SIZE);
            st->named[j].leaf = i;
            st->nnamed++;
        }
    }
    if (st->nnamed == 0) {
        send_set(req);
        return;
    }
    st->pending = 0;
    send_named(req, &st->named[0]);
}

void joinrules_post(request *req)
{
    json_t *body;
    char id[IDS_SIZE];
    rule_set *st = entity_write_open(req, id, sizeof *st, &body);
    if (!st)
        return;
    memcpy(st->id, id, IDS_SIZE);
    json_t *rule = json_object_get(body, "rule");
    verr e;
    if (!rule) {
        json_decref(body);
        request_fail_field(req, "rule", "rule is required.");
        return;
    }
    if (joinrule_parse(rule, chain_known, req->app->joinread, &st->r, &e) != 0) {
        json_decref(body);
        validate_fail(req, &e);
        return;
    }
    json_decref(body);
    st->json = joinrule_render(&st->r);
    if (!st->json) {
        request_fail_internal(req, "out of memory");
        return;
    }
    req->on_reset = rule_set_reset;
    req->on_reset_data = st;
    /* Asked first (CONTRACT section 12): no entity a leaf names is read for a caller who may
     * not set the rule. */
    entity_check(req, st->id, "staff", "", NULL, 0, on_set_gate);
}

/* ---- GET …/join-rules ---- */

static void on_get(void *data, int status, redisReply *r)
{
    request *req = data;
    r = (redisReply *)entity_gate_reply(req, status, r);
    if (!r)
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 3) {
        request_fail_internal(req, "join rules: unexpected reply");
        return;
    }
    const redisReply *f = r->element[0];
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return;
    }
    bool enabled = entity_flag(f->element[1]), owner = r->element[1]->integer != 0,
         admin = r->element[2]->integer != 0;
    if (!reads_is_platform(req)) {
        if (!enabled && !owner) {
            request_fail(req, 404, "not_found", "No such entity.", NULL);
            return;
        }
        if (!owner && !admin) {
            request_fail(req, 403, "forbidden",
                         "Only the entity's owners and admins may read its join rule.", NULL);
            return;
        }
    }
    if (r->elements != 5 || r->element[4]->type != REDIS_REPLY_ARRAY ||
        r->element[4]->elements != 3) {
        request_fail_internal(req, "join rules: unexpected reply");
        return;
    }
    const redisReply *h = r->element[4];
    if (h->element[0]->type != REDIS_REPLY_STRING) {
        request_fail(req, 404, "not_found", "This entity has no join rule.", NULL);
        return;
    }
    json_t *data_obj = json_object();
    json_object_set_new(data_obj, "rule",
                        json_loadb(h->element[0]->str, h->element[0]->len, 0, NULL));
    json_object_set_new(data_obj, "updatedAt", respond_string(h->element[1]));
    json_object_set_new(data_obj, "updatedBy", respond_string(h->element[2]));
    json_t *out = respond_ok();
    json_object_set_new(out, "data", data_obj);
    request_reply(req, 200, out);
}

void joinrules_get(request *req)
{
    char id[IDS_SIZE];
    if (!entity_path_id(req, id))
        return;
    entity_keys k;
    keys_entity(&k, id);
    char *join = arena_alloc(&req->pool, KEYS_ENTITY_SIZE);
    if (!join) {
        request_fail_internal(req, "out of memory");
        return;
    }
    keys_join(join, id, "");
    static const char *const fields[] = {"id", "isEnabled", "public"};
    static const size_t flens[] = {2, 9, 6};
    const char *hm[] = {"HMGET", join, "rule", "updatedAt", "updatedBy"};
    size_t hlens[] = {5, strlen(join), 4, 9, 9};
    store_cmd read = {5, hm, hlens}, cmd;
    entity_gate g;
    entity_gate_init(&g, req, &k, 'e', 3, fields, flens);
    entity_gate_add(&g, &read);
    if (entity_gate_cmd(&g, req, &cmd))
        store_exec(req->app->store, on_get, req, 1, &cmd);
}

/* ---- DELETE …/join-rules ---- */

static void on_delete(void *data, int status, redisReply *r)
{
    request *req = data;
    if (respond_store_failed(req, status, r))
        return;
    request_reply(req, 200, respond_ok());
}

void joinrules_delete(request *req)
{
    char id[IDS_SIZE];
    if (!entity_path_id(req, id))
        return;
    entity_write w;
    entity_write_fill(req, id, isotime_now_ms(), &w);
    char join[KEYS_ENTITY_SIZE], due[KEYS_ENTITY_SIZE], failing[KEYS_ENTITY_SIZE];
    keys_join(join, id, "");
    keys_join(due, id, ":due");
    keys_join(failing, id, ":failing");
    const char *argv[] = {
        w.k.entity,  w.k.owners,
        w.k.admins,  join,
        due,         failing,
        req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        w.ev.at,     w.ev.max};
    size_t lens[10];
    for (int i = 0; i < 10; i++)
        lens[i] = strlen(argv[i]);
    store_script(req->app->store, LUA_JOIN_RULE_DELETE, on_delete, req, 6, 10, argv, lens);
}
