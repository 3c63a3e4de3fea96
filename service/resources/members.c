/* handlers_members: members leave an entity: removed by its owners and admins (one, or many),
 * or by their own choice. Adding them is force-add (entities.c). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/app.h"
#include "auth/auth.h"
#include "resources/entity.h"
#include "resources/findindex.h"
#include "resources/handlers.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"
#include "jobs/sweeper.h"

/* The entity and addresses a removal names, kept for its answer: the boards to drop from the
 * read cache, and the wallets whose index entries to drop (findindex.h: remove-after). */
typedef struct removal {
    char id[IDS_SIZE];
    bool leave;
    int64_t listed_ms; /* when the entity was listed in the sweeps set, or 0 */
    char one[43];      /* the address of a removal of one, or of the caller leaving */
    const char (*addrs)[43];
    size_t n;
    bool unlisted; /* no address was a member at the check: the sweeps set was left alone */
} removal;

/* members_remove.lua answers {removed, missing, board...}. */
static void on_removed(void *data, int status, redisReply *r)
{
    request *req = data;
    const removal *m = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "members_remove: unexpected reply");
        return;
    }
    entity_drop_boards(req, m->id, r, 2);
    if (r->element[0]->integer > 0)
        indexes_drop_roles(req->app, m->id, m->addrs, m->n, INDEXES_MEMBER, false);
    json_t *out = respond_ok();
    json_object_set_new(out, "removed", json_integer(r->element[0]->integer));
    if (!m->leave)
        json_object_set_new(out, "missing", json_integer(r->element[1]->integer));
    if (r->element[0]->integer > 0 && m->unlisted) /* members added since the check */
        sweeper_note_waiting(req->app->sweeper, m->id);
    if (r->element[0]->integer > 0)
        sweeper_kick(req->app->sweeper);
    request_reply(req, 200, out);
}

static void send_removal(request *req);

/* The entity is in the sweeps set: now the removal may leave tombstones for the sweeper. */
static void on_listed(void *data, int status, redisReply *r)
{
    request *req = data;
    removal *m = req->state;
    if (respond_store_failed(req, status, r))
        return;
    sweeper_listed(req->app->sweeper, m->id, m->listed_ms);
    send_removal(req);
}

static void on_removal_check(request *req, const redisReply *r);

/* Runs members_remove.lua for the addresses: mode "remove" (owners and admins) or "leave".
 * The entity is listed in the sweeps set first (jobs/sweeper.h), unless this process did so
 * lately enough that its entry is still there: the removal's tombstones are then always
 * found, whatever crashes in between. */

static void run(request *req, removal *m, const char (*addrs)[43], size_t n)
{
    req->state = m;
    m->addrs = addrs;
    m->n = n;
    /* Listed lately: nothing to write ahead, so no check either (the script's own gate is
     * enough, and removals of one turn stay one script call). */
    if (!sweeper_must_list(req->app->sweeper, m->id, isotime_now_ms())) {
        send_removal(req);
        return;
    }
    /* Asked first (CONTRACT §12): a caller the script would refuse lists nothing. */
    entity_check(req, m->id, m->leave ? "leave" : "staff", INDEXES_MEMBER, addrs, n,
                 on_removal_check);
}

static void on_removal_check(request *req, const redisReply *r)
{
    removal *m = req->state;
    bool any = false;
    for (size_t i = 0; i < m->n && !any; i++)
        any = r->element[1 + i]->type == REDIS_REPLY_INTEGER && r->element[1 + i]->integer == 1;
    /* No member to remove: no tombstones, so no listing (a removal of members added since
     * notes the entity after its answer instead). */
    if (!any) {
        m->unlisted = true;
        send_removal(req);
        return;
    }
    int64_t now = isotime_now_ms();
    if (!sweeper_must_list(req->app->sweeper, m->id, now)) { /* listed meanwhile */
        send_removal(req);
        return;
    }
    m->listed_ms = now;
    sweeper_send_listing(req->app->store, m->id, now, on_listed, req);
}

static void send_removal(request *req)
{
    removal *m = req->state;
    entity_keys k;
    keys_entity(&k, m->id);
    char board[KEYS_BOARD_SIZE], version[17];
    keys_board(board, m->id, "xp");
    /* A fresh members version: cached users pages of the old list are never served again. */
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness for the members version");
        return;
    }
    hex_encode(rnd, sizeof rnd, version);
    entity_event_args ev;
    entity_event_args_fill(req, group_now_ms(req->app->groups), &ev);
    /* The removals of one entity in one loop turn leave as one call (redis/group.h): the
     * entity's keys and the turn's time are shared, the rest is each removal's own. */
    const char *head[] = {k.entity,
                          k.owners,
                          k.admins,
                          k.members,
                          k.order,
                          board,
                          ev.max,
                          ev.at,
                          req->caller,
                          auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                          m->leave ? "leave" : "remove",
                          version};
    entity_group_script(req, LUA_MEMBERS_REMOVE, on_removed, 6, 2, head,
                        sizeof head / sizeof head[0], m->addrs, m->n);
}

void members_delete(request *req)
{
    removal *m = request_state(req, sizeof *m);
    if (!m || !entity_path_id(req, m->id))
        return;
    m->leave = false;
    slice a = request_path_param(req, 1);
    verr e;
    if (validate_address(a.s, a.len, "address", m->one, &e) != 0) {
        request_fail(req, 404, "not_found", "No such member address.", NULL);
        return;
    }
    run(req, m, (const char(*)[43]) & m->one, 1);
}

void members_remove_post(request *req)
{
    removal *m = request_state(req, sizeof *m);
    if (!m)
        return;
    entity_addresses a;
    json_t *body = entity_addresses_body(req, 1000, &a);
    if (!body)
        return;
    json_decref(body);
    memcpy(m->id, a.id, IDS_SIZE);
    m->leave = false;
    run(req, m, a.list, a.n);
}

void entity_leave(request *req)
{
    removal *m = request_state(req, sizeof *m);
    if (!m || !entity_path_id(req, m->id))
        return;
    m->leave = true;
    snprintf(m->one, sizeof m->one, "%s", req->caller);
    run(req, m, (const char(*)[43]) & m->one, 1);
}
