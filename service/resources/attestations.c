/* attestations: levels reached as EAS off-chain attestations (CONTRACT §10): the
 * attester's configuration, and a member's attestations, read in one round trip (the
 * progression read and the entity's name in one transaction) and signed by attester.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/attester.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/progress.h"
#include "api/respond.h"
#include "core/app.h"
#include "cache/readcache.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"

static bool enabled(request *req)
{
    if (req->app->attester)
        return true;
    request_fail(req, 404, "not_found",
                 "Attestations are not enabled on this service (no ATTESTATION_KEY_FILE).", NULL);
    return false;
}

/* ---- GET /api/attestations/config ---- */

void attestations_config_get(request *req)
{
    if (!enabled(req))
        return;
    size_t len;
    const char *body = attester_config_json(req->app->attester, &len);
    request_reply_raw(req, 200, "application/json", body, len);
}

/* ---- GET /api/entities/{id}/members/{address}/attestations ---- */

typedef struct attest_req {
    member_req m;
    attest_item *items;
    size_t n;
} attest_req;

static int64_t parse_ms(const char *s, size_t n)
{
    int64_t v = 0;
    for (size_t i = 0; i < n && i < 18; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return n ? v : -1;
}

/* The member's recorded reachedAt of a level, from the prog hash's "r:<column>" field (the
 * template's level column: its id, and ":<generation>" for a level recreated after a delete). */
static bool reached_at(const redisReply *prog, slice id, int64_t *ms)
{
    for (size_t i = 0; i + 1 < prog->elements; i += 2) {
        const redisReply *k = prog->element[i], *v = prog->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == id.len + 2 && k->str[0] == 'r' &&
            k->str[1] == ':' && !memcmp(k->str + 2, id.s, id.len) &&
            v->type == REDIS_REPLY_STRING) {
            *ms = parse_ms(v->str, v->len);
            return *ms >= 0;
        }
    }
    return false;
}

static int by_reached_then_id(const void *a, const void *b)
{
    const attest_item *x = a, *y = b;
    if (x->reached_at_ms != y->reached_at_ms)
        return x->reached_at_ms < y->reached_at_ms ? -1 : 1;
    size_t n = x->level_id_len < y->level_id_len ? x->level_id_len : y->level_id_len;
    int c = memcmp(x->level_id, y->level_id, n);
    if (c)
        return c;
    return x->level_id_len < y->level_id_len ? -1 : x->level_id_len > y->level_id_len;
}

/* The answer; with `r` (the read's reply, still at hand), kept beside it in the read cache, so
 * that the same read again renders nothing. */
static void answer(request *req, const attest_req *q, const redisReply *r)
{
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    for (size_t i = 0; i < q->n; i++) {
        if (i)
            buf_append(b, ",", 1);
        buf_append(b, q->items[i].json, q->items[i].json_len);
    }
    buf_append_str(b, "]}");
    if (r)
        readcache_keep_rendered(req->app->reads, r, INT64_MAX, b->data, b->len);
    respond_send(req, 200, b);
}

static void on_signed(void *ctx, int status)
{
    request *req = ctx;
    if (status != 0) {
        request_fail_internal(req, "attestations: signing failed");
        return;
    }
    answer(req, req->state, NULL);
}

/* Copies len bytes into the pool: the reply they come from is gone once signing runs. */
static const char *pool_copy(request *req, const char *s, size_t len)
{
    char *c = arena_alloc(&req->pool, len ? len : 1);
    if (c)
        memcpy(c, s, len);
    return c;
}

static void on_attestations(void *data, int status, redisReply *r)
{
    request *req = data;
    attest_req *q = req->state;
    const redisReply *f = progress_read_check(req, status, r, 1, &q->m);
    if (!f)
        return;
    const redisReply *prog = f->element[4], *tpl = f->element[6],
                     *name = r->element[1 + ENTITY_ROLE_CMDS];
    if (name->type != REDIS_REPLY_STRING && name->type != REDIS_REPLY_NIL) {
        request_fail_internal(req, "attestations: unexpected reply");
        return;
    }
    /* A repeated read: the answer kept beside the read cache's answer (the same facts, so the
     * same attestations). */
    size_t kept_len;
    const char *kept = readcache_rendered(req->app->reads, r, isotime_now_ms(), &kept_len);
    if (kept) {
        slice part = {kept, kept_len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    /* Level lines of the template (lua/_prelude.lua, progtpl_build):
     * "L\t<id>\t<XP>\t<endsAt>\t<name as a JSON string>\t<needs>" */
    size_t cap = 0;
    for (size_t i = 0; i < tpl->len; i++)
        cap += tpl->str[i] == '\n';
    q->items = arena_alloc(&req->pool, (cap + 1) * sizeof *q->items);
    if (!q->items) {
        request_fail_internal(req, "out of memory");
        return;
    }
    q->n = 0;
    for (slice t = {tpl->str, tpl->len}; t.len && q->n <= cap;) {
        slice line = progress_next_field(&t, '\n');
        if (line.len < 2 || line.s[0] != 'L' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        /* The column is the level id, then ":<generation>" once a level of that id was
         * deleted; the whole column names the reachedAt field (_prelude.lua, progtpl_build). */
        slice col = progress_next_field(&line, '\t');
        slice gen = col, id = progress_next_field(&gen, ':');
        progress_next_field(&line, '\t'); /* XP */
        progress_next_field(&line, '\t'); /* endsAt */
        slice lname = progress_next_field(&line, '\t');
        int64_t ms;
        if (!id.len || !lname.len || !reached_at(prog, col, &ms))
            continue;
        attest_item *it = &q->items[q->n++];
        memset(it, 0, sizeof *it);
        it->level_id = pool_copy(req, id.s, id.len);
        it->level_name_json = pool_copy(req, lname.s, lname.len);
        it->level_id_len = id.len, it->level_name_json_len = lname.len;
        it->reached_at_ms = ms;
        if (!it->level_id || !it->level_name_json) {
            request_fail_internal(req, "out of memory");
            return;
        }
    }
    qsort(q->items, q->n, sizeof *q->items, by_reached_then_id);
    const char *ename = name->type == REDIS_REPLY_STRING ? name->str : "";
    size_t ename_len = name->type == REDIS_REPLY_STRING ? name->len : 0;
    int rc = attester_render(req->app->attester, req->app->loop, &req->pool, q->m.id, ename,
                             ename_len, q->m.addr, q->items, q->n, on_signed, req);
    if (rc < 0)
        request_fail_internal(req, "attestations: cannot sign");
    else if (rc == 1)
        answer(req, q, r);
}

void attestations_get(request *req)
{
    if (!enabled(req))
        return;
    attest_req *q = request_state(req, sizeof *q);
    if (!q)
        return;
    if (!entity_path_id(req, q->m.id))
        return;
    entity_keys k;
    keys_entity(&k, q->m.id);
    const char *argv[] = {"HGET", k.entity, "name"};
    size_t lens[] = {4, k.entity_len, 4};
    store_cmd extra = {3, argv, lens};
    progress_read_send(req, 'A', &extra, 1, on_attestations, &q->m);
}
