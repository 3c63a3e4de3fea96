/* admins: an entity's admins, listed by its owners and admins, managed by its owners. */
#include "core/app.h"
#include "auth/auth.h"
#include "resources/findindex.h"
#include "resources/handlers.h"
#include "resources/entity.h"
#include "core/ids.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"

/* Every admin route answers with the full, sorted list (from element `from` on). */
static void answer_admins(request *req, const redisReply *r, size_t from)
{
    json_t *list = json_array();
    for (size_t i = from; i < r->elements; i++)
        json_array_append_new(list, respond_string(r->element[i]));
    json_t *out = respond_ok();
    json_object_set_new(out, "admins", list);
    request_reply(req, 200, out);
}

static void on_admins(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "admins: unexpected reply"))
        return;
    answer_admins(req, r, 0);
}

/* Runs an admin script: keys entity, owners, admins (and for a removal the webhooks hash,
 * whose endpoints an address left with no role loses); args caller, platform, then for the
 * writes EVENTS_MAX and the time, for an add MAX_ADMINS_PER_ENTITY, then addresses... */
static void run(request *req, const char *id, int script, const char (*addrs)[43], size_t n,
                store_cb cb)
{
    entity_write w;
    entity_write_fill(req, id, isotime_now_ms(), &w);
    char limit[24], hooks[KEYS_ENTITY_SIZE];
    snprintf(limit, sizeof limit, "%lld", (long long)req->app->cfg.max_admins_per_entity);
    keys_webhooks(hooks, id);
    int nkeys = script == LUA_ADMINS_REMOVE ? 4 : 3;
    const char *head[9] = {w.k.entity, w.k.owners, w.k.admins, hooks};
    size_t nhead = (size_t)nkeys;
    head[nhead++] = req->caller;
    head[nhead++] = auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0";
    /* A list reads no event arguments; only an add takes the most admins. */
    if (script != LUA_ADMINS_LIST) {
        head[nhead++] = w.ev.max;
        head[nhead++] = w.ev.at;
    }
    if (script == LUA_ADMINS_ADD)
        head[nhead++] = limit;
    entity_script(req, script, cb, nkeys, head, nhead, addrs, n);
}

void admins_get(request *req)
{
    char id[IDS_SIZE];
    if (entity_path_id(req, id))
        run(req, id, LUA_ADMINS_LIST, NULL, 0, on_admins);
}

/* An add of admins: its addresses, and what its index add wrote. */
typedef struct admins_add_state {
    entity_addresses a;
    findindex_added added;
    size_t ngaining;  /* the addresses the check found no admin, indexed ahead */
    char (*held)[43]; /* the others, admins at the check */
    size_t nheld;
    json_t *answer; /* kept while late index entries are added */
} admins_add_state;

static void on_indexed_after(request *req, int status)
{
    (void)status; /* the write happened: an index add-after that failed does not undo it */
    admins_add_state *st = req->state;
    request_reply(req, 200, st->answer);
}

/* {the number of admins added, then the sorted admins} */
static void on_admins_added(void *data, int status, redisReply *r)
{
    request *req = data;
    admins_add_state *st = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR) {
        findindex_refuse(req, &st->added, r);
        return;
    }
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "admins: unexpected reply");
        return;
    }
    /* More added than the check found missing: admins it saw were removed before the script
     * ran (their entries perhaps dropped since), and are admins again. Their entries are
     * added now, before the answer (an add-after, in this race only). */
    if (r->element[0]->integer > (long long)st->ngaining && st->nheld) {
        json_t *list = json_array();
        for (size_t i = 1; i < r->elements; i++)
            json_array_append_new(list, respond_string(r->element[i]));
        st->answer = respond_ok();
        json_object_set_new(st->answer, "admins", list);
        findindex_add(req, st->a.id, (const char(*)[43])st->held, st->nheld, INDEXES_ADMIN, 0, NULL,
                      0, NULL, on_indexed_after);
        return;
    }
    answer_admins(req, r, 1);
}

static void admins_add_write(request *req, int status)
{
    admins_add_state *st = req->state;
    if (status != STORE_OK) {
        respond_store_failed(req, status, NULL);
        return;
    }
    run(req, st->a.id, LUA_ADMINS_ADD, st->a.list, st->a.n, on_admins_added);
}

/* Add-before (findindex.h), once the check let the caller through (CONTRACT §12): every
 * address listed that is no admin yet may become one. */
static void on_admins_check(request *req, const redisReply *r)
{
    admins_add_state *st = req->state;
    char(*gaining)[43];
    size_t n = entity_check_split(req, r, (const char(*)[43])st->a.list, st->a.n, false, &gaining);
    st->ngaining = n;
    st->nheld = entity_check_split(req, r, (const char(*)[43])st->a.list, st->a.n, true, &st->held);
    if (!gaining || !st->held) {
        request_fail_internal(req, "out of memory");
        return;
    }
    findindex_add(req, st->a.id, (const char(*)[43])gaining, n, INDEXES_ADMIN, 0, NULL, 0,
                  &st->added, admins_add_write);
}

void admins_post(request *req)
{
    admins_add_state *st = request_state(req, sizeof *st);
    if (!st)
        return;
    json_t *body = entity_addresses_body(req, 100, &st->a);
    if (!body)
        return;
    json_decref(body);
    entity_check(req, st->a.id, "owners", INDEXES_ADMIN, (const char(*)[43])st->a.list, st->a.n,
                 on_admins_check);
}

/* The removal's answer, then its remove-after (findindex.h). */
static void on_admin_removed(void *data, int status, redisReply *r)
{
    request *req = data;
    entity_addresses *a = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY)
        indexes_drop_roles(req->app, a->id, (const char(*)[43])a->list, a->n, INDEXES_ADMIN, false);
    on_admins(data, status, r);
}

void admins_delete(request *req)
{
    char id[IDS_SIZE];
    if (!entity_path_id(req, id))
        return;
    slice a = request_path_param(req, 1);
    char lower[43];
    verr e;
    if (validate_address(a.s, a.len, "address", lower, &e) != 0) {
        request_fail(req, 404, "not_found", "No such admin address.", NULL);
        return;
    }
    entity_addresses *ea = request_state(req, sizeof *ea + sizeof lower);
    if (!ea)
        return;
    memcpy(ea->id, id, IDS_SIZE);
    ea->list = (char(*)[43])(ea + 1);
    memcpy(ea->list[0], lower, sizeof lower);
    ea->n = 1;
    run(req, id, LUA_ADMINS_REMOVE, (const char(*)[43])ea->list, 1, on_admin_removed);
}
