/* entity: the Entity resource's fields, its JSON shape, body validation and the read rule. */
#include "resources/entity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "auth/auth.h"
#include "core/ids.h"
#include "redis/group.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "cache/readcache.h"

/* Text fields: body name, stored (and returned) name, kind, required on create and update. */
typedef struct text_field {
    const char *body, *stored;
    int kind;
    bool required;
} text_field;

static const text_field text_fields[] = {
    {"name", "name", TEXT_NAME, true},
    {"description", "description", TEXT_DESCRIPTION, true},
    {"twitter", "twitter", TEXT_SOCIAL, true},
    {"discord", "discord", TEXT_SOCIAL, true},
    {"website", "website", TEXT_URL, true},
    {"imageUrl", "imageURL", TEXT_URL, true},
    {"telegram", "telegram", TEXT_SOCIAL, false},
    {"instagram", "instagram", TEXT_SOCIAL, false},
    {"openseaSlug", "openseaSlug", TEXT_SOCIAL, false},
    {"defaultDyNftThemeId", "defaultDyNftThemeId", TEXT_SOCIAL, false},
    {"bannerUrl", "bannerURL", TEXT_URL, false},
};
#define NTEXT (sizeof text_fields / sizeof text_fields[0])

static int fail(verr *e, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message, "%s %s", field, message);
    return -1;
}

static bool valid_alias(const char *s, size_t n)
{
    if (n < 3 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

int entity_parse_input(request *req, json_t *body, entity_input *in, verr *e)
{
    memset(in, 0, sizeof *in);
    in->fields = json_object();
    for (size_t i = 0; i < NTEXT; i++) {
        const char *s;
        size_t n;
        int rc = validate_text(body, text_fields[i].body, text_fields[i].required,
                               text_fields[i].kind, &s, &n, e);
        if (rc < 0)
            return -1;
        if (rc > 0)
            json_object_set_new(in->fields, text_fields[i].stored, json_stringn(s, n));
    }
    json_t *owners = json_object_get(body, "ownerAddresses");
    if (!owners)
        return fail(e, "ownerAddresses", "is required.");
    if (validate_addresses(&req->pool, owners, "ownerAddresses", 1, 50, false, &in->owners,
                           &in->nowners, e) != 0)
        return -1;
    json_t *contracts = json_object_get(body, "contracts");
    if (contracts) {
        char(*list)[43];
        size_t n;
        if (validate_addresses(&req->pool, contracts, "contracts", 0, 1000, true, &list, &n, e))
            return -1;
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, json_string(list[i]));
        char *text = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
        json_object_set_new(in->fields, "contracts", json_string(text ? text : "[]"));
        free(text);
    }
    const char *alias;
    size_t alen;
    int rc = validate_text(body, "communityURLAlias", false, TEXT_SOCIAL, &alias, &alen, e);
    if (rc < 0)
        return -1;
    if (rc > 0) {
        if (alen && !valid_alias(alias, alen))
            return fail(e, "communityURLAlias",
                        "must be empty or 3 to 64 characters of a-z, 0-9 and '-'.");
        in->has_alias = true;
        memcpy(in->alias, alias, alen);
        in->alias[alen] = '\0';
        json_object_set_new(in->fields, "communityURLAlias", json_stringn(alias, alen));
    }
    bool b;
    if ((rc = validate_bool(body, "public", &b, e)) < 0)
        return -1;
    if (rc > 0)
        json_object_set_new(in->fields, "public", json_string(b ? "1" : "0"));
    if ((rc = validate_bool(body, "isEnabled", &in->enabled, e)) < 0)
        return -1;
    in->has_enabled = rc > 0;
    if (in->has_enabled)
        json_object_set_new(in->fields, "isEnabled", json_string(in->enabled ? "1" : "0"));
    if ((rc = validate_int(body, "__v", 0, INT64_MAX, &in->v, e)) < 0)
        return -1;
    in->has_v = rc > 0;

    /* The entity to update: body id or query entityID; both given must agree. */
    json_t *id = json_object_get(body, "id");
    size_t qlen = 0;
    const char *qid = request_param(req, "entityID", &qlen);
    if (id && !json_is_null(id)) {
        if (!json_is_string(id) || !ids_valid(json_string_value(id), json_string_length(id), 'c'))
            return fail(e, "id", "must be an entity id (c- followed by a lowercase UUIDv4).");
        memcpy(in->id, json_string_value(id), IDS_SIZE);
        in->has_id = true;
    }
    if (qid) {
        if (!ids_valid(qid, qlen, 'c'))
            return fail(e, "entityID", "must be an entity id (c- followed by a lowercase UUIDv4).");
        if (in->has_id && strcmp(in->id, qid) != 0)
            return fail(e, "id", "differs from the entityID query parameter.");
        memcpy(in->id, qid, IDS_SIZE);
        in->has_id = true;
    }
    return 0;
}

void entity_fill_defaults(entity_input *in)
{
    for (size_t i = 0; i < NTEXT; i++)
        if (!json_object_get(in->fields, text_fields[i].stored))
            json_object_set_new(in->fields, text_fields[i].stored, json_string(""));
    static const char *const defaults[][2] = {
        {"contracts", "[]"}, {"communityURLAlias", ""}, {"public", "1"}, {"isEnabled", "1"}};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!json_object_get(in->fields, defaults[i][0]))
            json_object_set_new(in->fields, defaults[i][0], json_string(defaults[i][1]));
    json_object_set_new(in->fields, "__v", json_string("0"));
}

bool entity_flag(const redisReply *r)
{
    return !(r && r->type == REDIS_REPLY_STRING && r->len == 1 && r->str[0] == '0');
}

int entity_read_rule(bool enabled, bool is_public, int role, bool platform, bool signed_in,
                     bool unsigned_ok)
{
    if (!enabled)
        return platform || role == ROLE_OWNER ? 0 : 404;
    if (is_public)
        return signed_in || unsigned_ok ? 0 : 401;
    if (!signed_in)
        return 401;
    return platform || role != ROLE_NONE ? 0 : 403;
}

void entity_fail_read(request *req, int status)
{
    if (status == 401)
        request_fail(req, 401, "unauthenticated",
                     "Sign in (address and signature) to read this entity.", NULL);
    else if (status == 403)
        request_fail(req, 403, "forbidden",
                     "This entity is private to its owners, admins and members.", NULL);
    else
        request_fail(req, 404, "not_found", "No such entity.", NULL);
}

bool entity_path_id(request *req, char out[IDS_SIZE])
{
    slice id = request_path_param(req, 0);
    if (!ids_valid(id.s, id.len, 'c')) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return false;
    }
    memcpy(out, id.s, id.len);
    out[id.len] = '\0';
    return true;
}

bool entity_path_part(request *req, char eid[IDS_SIZE], char kind, char *part)
{
    slice e = request_path_param(req, 0), p = request_path_param(req, 1);
    bool level = kind == 'l';
    if (!ids_valid(e.s, e.len, 'c') ||
        !(level ? ids_valid_level(p.s, p.len) : ids_valid(p.s, p.len, kind))) {
        request_fail(req, 404, "not_found",
                     level ? "No such entity or level." : "No such entity or skill.", NULL);
        return false;
    }
    memcpy(eid, e.s, e.len);
    eid[e.len] = '\0';
    memcpy(part, p.s, p.len);
    part[p.len] = '\0';
    return true;
}

json_t *entity_addresses_body(request *req, size_t max, entity_addresses *out)
{
    if (!entity_path_id(req, out->id))
        return NULL;
    json_t *body = validate_body(req);
    if (!body)
        return NULL;
    if (validate_address_field(req, body, "addresses", 1, max, &out->list, &out->n) != 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

void entity_drop_boards(request *req, const char *entity_id, const redisReply *r, size_t from)
{
    readcache *rc = req->app->reads;
    if (!rc || !readcache_enabled(rc) || r->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = from; i < r->elements; i++) {
        const redisReply *by = r->element[i];
        char key[KEYS_BOARD_SIZE];
        if (by->type != REDIS_REPLY_STRING ||
            !((by->len == 2 && !memcmp(by->str, "xp", 2)) || ids_valid(by->str, by->len, 's')))
            continue;
        char name[IDS_SIZE];
        memcpy(name, by->str, by->len);
        name[by->len] = '\0';
        readcache_invalidate(rc, key, keys_board(key, entity_id, name));
    }
}

void entity_event_args_fill(const request *req, int64_t now_ms, entity_event_args *a)
{
    size_t n = buf_format_int(a->max, (long long)req->app->cfg.events_max);
    a->max[n] = ':';
    n += 1 + buf_format_int(a->max + n + 1, (long long)req->app->cfg.events_max_bytes);
    if (req->api_key_id[0])
        snprintf(a->max + n, sizeof a->max - n, ":%s", req->api_key_id);
    isotime_format(now_ms, a->at);
}

void entity_write_fill(const request *req, const char *id, int64_t now_ms, entity_write *w)
{
    keys_entity(&w->k, id);
    entity_event_args_fill(req, now_ms, &w->ev);
}

/* head then the addresses, as one argument vector in the request's pool; false (500
 * answered) when out of memory. */
static bool script_args(request *req, const char *const *head, size_t nhead,
                        const char (*addrs)[43], size_t naddrs, const char ***argv, size_t **lens)
{
    size_t argc = nhead + naddrs;
    *argv = arena_alloc(&req->pool, argc * sizeof **argv);
    *lens = arena_alloc(&req->pool, argc * sizeof **lens);
    if (!*argv || !*lens) {
        request_fail_internal(req, "out of memory");
        return false;
    }
    for (size_t i = 0; i < nhead; i++)
        (*argv)[i] = head[i];
    for (size_t i = 0; i < naddrs; i++)
        (*argv)[nhead + i] = addrs[i];
    for (size_t i = 0; i < argc; i++)
        (*lens)[i] = strlen((*argv)[i]);
    return true;
}

void entity_script(request *req, int script, store_cb cb, int nkeys, const char *const *head,
                   size_t nhead, const char (*addrs)[43], size_t naddrs)
{
    const char **argv;
    size_t *lens;
    if (script_args(req, head, nhead, addrs, naddrs, &argv, &lens))
        store_script(req->app->store, script, cb, req, nkeys, (int)(nhead + naddrs), argv, lens);
}

void entity_group_script(request *req, int script, store_cb cb, int nshared_keys, int nshared_args,
                         const char *const *head, size_t nhead, const char (*addrs)[43],
                         size_t naddrs)
{
    const char **argv;
    size_t *lens;
    if (script_args(req, head, nhead, addrs, naddrs, &argv, &lens))
        group_script(req->app->groups, script, cb, req, nshared_keys, nshared_args, 0,
                     (int)(nhead + naddrs), argv, lens);
}

/* One entity_check on its way. */
typedef struct check_state {
    request *req;
    entity_check_done done;
    size_t naddrs;
} check_state;

static void on_check(void *data, int status, redisReply *r)
{
    check_state *c = data;
    if (respond_store_failed(c->req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 + c->naddrs) {
        request_fail_internal(c->req, "write_check: unexpected reply");
        return;
    }
    c->done(c->req, r);
}

void entity_check(request *req, const char *id, const char *who, const char *role,
                  const char (*addrs)[43], size_t naddrs, entity_check_done done)
{
    check_state *c = arena_alloc(&req->pool, sizeof *c);
    if (!c) {
        request_fail_internal(req, "out of memory");
        return;
    }
    *c = (check_state){req, done, naddrs};
    entity_keys k;
    keys_entity(&k, id);
    const char *head[] = {
        k.entity,  k.owners,    k.admins,
        k.members, req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        who,       role};
    size_t nhead = sizeof head / sizeof head[0];
    const char **argv;
    size_t *lens;
    if (script_args(req, head, nhead, addrs, naddrs, &argv, &lens))
        store_script(req->app->store, LUA_WRITE_CHECK, on_check, c, 4, (int)(nhead + naddrs), argv,
                     lens);
}

size_t entity_check_split(request *req, const redisReply *r, const char (*addrs)[43], size_t naddrs,
                          bool held, char (**out)[43])
{
    *out = naddrs ? arena_alloc(&req->pool, naddrs * sizeof **out) : NULL;
    if (!*out)
        return 0;
    bool answered = r->type == REDIS_REPLY_ARRAY && r->elements == 1 + naddrs;
    size_t n = 0;
    for (size_t i = 0; i < naddrs; i++) {
        const redisReply *h = answered ? r->element[1 + i] : NULL;
        if ((h && h->type == REDIS_REPLY_INTEGER && h->integer == 1) == held)
            memcpy((*out)[n++], addrs[i], 43);
    }
    return n;
}

/* The read rule over {first, isEnabled, public, ...}. Without the caller's role (have_role
 * false) a refusal that the strongest role would turn into a read is not final: the caller must
 * be asked for. Answers a final refusal itself. */
static entity_read decide(request *req, const redisReply *f, int role, bool have_role,
                          bool unsigned_ok)
{
    bool enabled = entity_flag(f->element[1]), is_public = entity_flag(f->element[2]);
    bool platform = auth_is_platform_admin(req->app->auth, req->caller);
    int rule = entity_read_rule(enabled, is_public, role, platform, req->signed_in, unsigned_ok);
    if (rule == 0)
        return ENTITY_READ_OK;
    if (!have_role && req->signed_in &&
        entity_read_rule(enabled, is_public, ROLE_OWNER, platform, true, unsigned_ok) == 0)
        return ENTITY_READ_ASK_ROLES;
    entity_fail_read(req, rule);
    return ENTITY_READ_ANSWERED;
}

void entity_role_cmds(entity_role_lookup *l, const entity_keys *k, const char *caller,
                      store_cmd out[ENTITY_ROLE_CMDS])
{
    static const char *const names[ENTITY_ROLE_CMDS] = {"SISMEMBER", "SISMEMBER", "HEXISTS"};
    const char *keys[ENTITY_ROLE_CMDS] = {k->owners, k->admins, k->members};
    size_t klens[ENTITY_ROLE_CMDS] = {k->owners_len, k->admins_len, k->members_len};
    size_t clen = strlen(caller);
    for (int i = 0; i < ENTITY_ROLE_CMDS; i++) {
        l->argv[i][0] = names[i];
        l->lens[i][0] = strlen(names[i]);
        l->argv[i][1] = keys[i];
        l->lens[i][1] = klens[i];
        l->argv[i][2] = caller;
        l->lens[i][2] = clen;
        out[i] = (store_cmd){3, l->argv[i], l->lens[i]};
    }
}

void entity_read_send(request *req, const entity_keys *k, int argc, const char **argv,
                      const size_t *lens, bool roles, store_cb alone, store_cb with_roles)
{
    if (!roles) {
        store_read(req->app->store, request_read_flags(req), alone, req, argc, argv, lens);
        return;
    }
    entity_gate g;
    store_cmd cmd;
    entity_gate_init(&g, req, k, 'r', argc - 2, argv + 2, lens + 2);
    if (entity_gate_cmd(&g, req, &cmd))
        store_read_exec(req->app->store, request_read_flags(req), with_roles, req, 1, &cmd);
}

entity_read entity_read_gated(request *req, int status, redisReply *r, bool unsigned_ok,
                              const redisReply **fields)
{
    const redisReply *g = entity_gate_reply(req, status, r);
    if (!g)
        return ENTITY_READ_ANSWERED;
    return entity_read_exec(req, STORE_OK, (redisReply *)g, 1 + ENTITY_ROLE_CMDS, ENTITY_ROLE_CMDS,
                            unsigned_ok, fields);
}

entity_read entity_read_exec(request *req, int status, redisReply *r, size_t nreplies, int nroles,
                             bool unsigned_ok, const redisReply **fields)
{
    if (respond_store_failed(req, status, r))
        return ENTITY_READ_ANSWERED;
    /* A gated read refused answers the HMGET and the role lookups alone. */
    bool ok = r->type == REDIS_REPLY_ARRAY &&
              (r->elements == nreplies || (nroles && r->elements == 1 + (size_t)nroles)) &&
              nreplies >= 1 + (size_t)nroles && r->element[0]->type == REDIS_REPLY_ARRAY &&
              r->element[0]->elements >= 3;
    for (size_t i = 1; ok && i <= (size_t)nroles; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        request_fail_internal(req, "entity read: unexpected reply");
        return ENTITY_READ_ANSWERED;
    }
    const redisReply *f = r->element[0];
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return ENTITY_READ_ANSWERED;
    }
    /* The strongest role first, as the write scripts' role_of. */
    int role = ROLE_NONE;
    if (nroles == ENTITY_ROLE_CMDS)
        role = r->element[1]->integer   ? ROLE_OWNER
               : r->element[2]->integer ? ROLE_ADMIN
               : r->element[3]->integer ? ROLE_MEMBER
                                        : ROLE_NONE;
    *fields = f;
    entity_read e = decide(req, f, role, nroles == ENTITY_ROLE_CMDS, unsigned_ok);
    if (e == ENTITY_READ_OK && r->elements != nreplies) {
        request_fail_internal(req, "entity read: refused by the gate");
        return ENTITY_READ_ANSWERED;
    }
    return e;
}

entity_read entity_read_fields(request *req, int status, redisReply *r, bool unsigned_ok)
{
    if (respond_store_failed(req, status, r))
        return ENTITY_READ_ANSWERED;
    if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                                       r->element[0]->type == REDIS_REPLY_NIL)) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return ENTITY_READ_ANSWERED;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
        request_fail_internal(req, "entity read: unexpected reply");
        return ENTITY_READ_ANSWERED;
    }
    return decide(req, r, ROLE_NONE, false, unsigned_ok);
}

size_t entity_json_parts(const char *json, size_t len, slice out[2])
{
    /* Records written before the Entity lost its creator end with
     * ,"createdBy":"0x<40 hex>","__v":<n>} (rendered last but __v): look only there, so a read
     * stays a copy. */
    static const char member[] = ",\"createdBy\":\"";
    const size_t mlen = sizeof member - 1, span = mlen + 42 + 1;
    size_t comma = len; /* the comma before "__v", the last member */
    while (comma > 0 && len - comma < 32 && json[comma - 1] != ',')
        comma--;
    out[0] = (slice){json, len};
    if (comma == 0 || json[comma - 1] != ',')
        return 1;
    size_t at = comma - 1;
    if (at < span || json[at - 1] != '"' || memcmp(json + at - span, member, mlen) != 0)
        return 1;
    out[0] = (slice){json, at - span};
    out[1] = (slice){json + at, len - at};
    return 2;
}

/* A small decimal number among the gate's arguments, kept in g. */
static const char *gate_num(entity_gate *g, int v, size_t *len)
{
    if (g->nnums >= ENTITY_GATE_ARGS || v < 0 || v > 999) {
        g->overflow = true;
        *len = 1;
        return "0";
    }
    char *s = g->nums[g->nnums++];
    size_t n = 0;
    if (v >= 100)
        s[n++] = (char)('0' + v / 100);
    if (v >= 10)
        s[n++] = (char)('0' + v / 10 % 10);
    s[n++] = (char)('0' + v % 10);
    s[n] = '\0';
    *len = n;
    return s;
}

static void gate_arg(entity_gate *g, const char *s, size_t len)
{
    if (g->nargs >= ENTITY_GATE_ARGS) {
        g->overflow = true;
        return;
    }
    g->args[g->nargs] = s;
    g->alens[g->nargs++] = len;
}

/* The index in KEYS (from 1) of key, added when new. */
static int gate_key(entity_gate *g, const char *key, size_t len)
{
    for (int i = 0; i < g->nkeys; i++)
        if (g->klens[i] == len && !memcmp(g->keys[i], key, len))
            return i + 1;
    if (g->nkeys >= ENTITY_GATE_KEYS) {
        g->overflow = true;
        return 1;
    }
    g->keys[g->nkeys] = key;
    g->klens[g->nkeys++] = len;
    return g->nkeys;
}

void entity_gate_init(entity_gate *g, request *req, const entity_keys *k, char rule, int n,
                      const char *const *fields, const size_t *lens)
{
    g->nkeys = g->nargs = g->nnums = 0;
    g->overflow = rule != 'r' && rule != 'e';
    gate_key(g, k->entity, k->entity_len);
    gate_key(g, k->owners, k->owners_len);
    gate_key(g, k->admins, k->admins_len);
    gate_key(g, k->members, k->members_len);
    bool platform = auth_is_platform_admin(req->app->auth, req->caller);
    gate_arg(g, rule == 'e' ? "e" : "r", 1);
    gate_arg(g, req->caller, strlen(req->caller));
    gate_arg(g, platform ? "1" : "0", 1);
    size_t nlen;
    const char *ns = gate_num(g, n, &nlen);
    gate_arg(g, ns, nlen);
    if (n < 3)
        g->overflow = true;
    for (int i = 0; i < n; i++)
        gate_arg(g, fields[i], lens[i]);
}

void entity_gate_add(entity_gate *g, const store_cmd *c)
{
    if (c->argc < 2) {
        g->overflow = true;
        return;
    }
    size_t len;
    const char *s = gate_num(g, c->argc, &len);
    gate_arg(g, s, len);
    gate_arg(g, c->argv[0], c->lens[0]);
    s = gate_num(g, gate_key(g, c->argv[1], c->lens[1]), &len);
    gate_arg(g, s, len);
    for (int i = 2; i < c->argc; i++)
        gate_arg(g, c->argv[i], c->lens[i]);
}

bool entity_gate_cmd(entity_gate *g, request *req, store_cmd *out)
{
    size_t len;
    const char *nk = gate_num(g, g->nkeys, &len);
    if (g->overflow) {
        request_fail_internal(req, "gated read: too many arguments");
        return false;
    }
    g->argv[0] = "EVALSHA";
    g->lens[0] = 7;
    g->argv[1] = store_script_sha(req->app->store, LUA_READ_GATE);
    g->lens[1] = 40;
    g->argv[2] = nk;
    g->lens[2] = len;
    int at = 3;
    for (int i = 0; i < g->nkeys; i++, at++)
        g->argv[at] = g->keys[i], g->lens[at] = g->klens[i];
    for (int i = 0; i < g->nargs; i++, at++)
        g->argv[at] = g->args[i], g->lens[at] = g->alens[i];
    *out = (store_cmd){at, g->argv, g->lens};
    return true;
}

const redisReply *entity_gate_reply(request *req, int status, const redisReply *r)
{
    if (respond_store_failed(req, status, (redisReply *)r))
        return NULL;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
        request_fail_internal(req, "gated read: unexpected reply");
        return NULL;
    }
    const redisReply *g = r->element[0];
    if (g->type == REDIS_REPLY_ERROR) {
        /* a script's error inside the transaction (NOSCRIPT after a flush: 503, and reloaded) */
        if (!respond_store_failed(req, STORE_OK, (redisReply *)g))
            request_fail_internal(req, "gated read: script error");
        return NULL;
    }
    return g;
}

void *entity_write_open(request *req, char id[IDS_SIZE], size_t size, json_t **body)
{
    if (!entity_path_id(req, id))
        return NULL;
    void *st = request_state(req, size);
    if (!st)
        return NULL;
    *body = validate_body(req);
    return *body ? st : NULL;
}
