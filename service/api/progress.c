/* handlers_progress: member progression, the read side (CONTRACT §5): a member's progress and
 * contributions, the leaderboards and the event feed. Each is one round trip to Redis: a read
 * script (progress.lua, leaderboard.lua, contrib_list.lua) or, for events, one MULTI … EXEC. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "auth/auth.h"
#include "api/entity.h"
#include "api/handlers.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"

/* A board entry (keys.h): "<9999999999999999 - value, 16 digits>:<address>". */
#define BOARD_ENTRY_LEN 59
/* A contribution index entry: "<createdAt ms, 16 digits>:k-<uuidv4>". */
#define CONTRIB_ENTRY_LEN (17 + IDS_SIZE - 1)
/* A stream id "<ms>-<seq>", both up to 20 digits. */
#define EVENT_ID_MAX 41

static bool is_platform(request *req)
{
    return auth_is_platform_admin(req->app->auth, req->caller);
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

static bool lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Reads the optional query parameter `limit` (min..max, default def) into *out, or answers 400
 * and returns false. */
static bool query_limit(request *req, long max, long def, long *out)
{
    size_t len;
    const char *lp = request_param(req, "limit", &len);
    *out = def;
    if (!lp)
        return true;
    long limit = 0;
    for (size_t i = 0; i < len && limit <= max; i++)
        limit = lp[i] >= '0' && lp[i] <= '9' ? limit * 10 + (lp[i] - '0') : max + 1;
    if (!len || limit < 1 || limit > max) {
        char msg[64];
        snprintf(msg, sizeof msg, "limit must be an integer from 1 to %ld.", max);
        request_fail_field(req, "limit", msg);
        return false;
    }
    *out = limit;
    return true;
}

/* Reads the optional hex `cursor` of a raw entry of `entry_len` bytes into out (NUL-ended; ""
 * when absent), checked by `valid`; or answers 400 and returns false. */
static bool query_cursor(request *req, size_t entry_len, bool (*valid)(const char *, size_t),
                         char *out)
{
    size_t len;
    const char *cp = request_param(req, "cursor", &len);
    out[0] = '\0';
    if (!cp || !len)
        return true;
    if (len != 2 * entry_len || hex_decode(cp, len, (uint8_t *)out, entry_len) != 0 ||
        !valid(out, entry_len)) {
        out[0] = '\0';
        request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
        return false;
    }
    out[entry_len] = '\0';
    return true;
}

/* Appends the nextCursor member: the hex of the entry the page ended with, or null. */
static void append_cursor(buf *b, const redisReply *next, size_t entry_len)
{
    buf_append_str(b, ",\"nextCursor\":");
    if (next->type == REDIS_REPLY_STRING && next->len == entry_len) {
        char hex[2 * BOARD_ENTRY_LEN + 1];
        hex_encode((const uint8_t *)next->str, entry_len, hex);
        buf_append(b, "\"", 1);
        buf_append(b, hex, 2 * entry_len);
        buf_append(b, "\"}", 2);
    } else {
        buf_append_str(b, "null}");
    }
}

/* The path's entity id and member address: a malformed one names nothing (404). */
static bool path_member(request *req, char id[IDS_SIZE], char addr[43])
{
    if (!entity_path_id(req, id))
        return false;
    slice a = request_path_param(req, 1);
    verr e;
    if (validate_address(a.s, a.len, "address", addr, &e) != 0) {
        request_fail(req, 404, "not_found", "No such member.", NULL);
        return false;
    }
    return true;
}

static int role_of(const redisReply *r)
{
    if (r->type != REDIS_REPLY_STRING)
        return ROLE_NONE;
    if (!strcmp(r->str, "owner"))
        return ROLE_OWNER;
    if (!strcmp(r->str, "admin"))
        return ROLE_ADMIN;
    if (!strcmp(r->str, "member"))
        return ROLE_MEMBER;
    return ROLE_NONE;
}

/* A read script's answer begins {isEnabled, public, role}: the read rule over it, or, where
 * `self` (the caller is the member asked), the member themself on an enabled entity. Answers
 * a refusal itself and returns false; also false (500) for a reply of another shape. */
static bool script_access(request *req, const redisReply *r, size_t min_elements, bool self)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
        request_fail_internal(req, "progress read: unexpected reply");
        return false;
    }
    bool enabled = entity_flag(r->element[0]), is_public = entity_flag(r->element[1]);
    int rule = entity_read_rule(enabled, is_public, role_of(r->element[2]), is_platform(req),
                                req->signed_in, false);
    if (rule == 403 && self)
        rule = 0;
    if (rule != 0) {
        entity_fail_read(req, rule);
        return false;
    }
    if (r->elements < min_elements) {
        request_fail_internal(req, "progress read: unexpected reply");
        return false;
    }
    return true;
}

/* Runs a read script, its arguments' lengths their strlen. */
static void run_script(request *req, int script, store_cb cb, int nkeys, const char **argv,
                       int argc)
{
    size_t lens[16];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    auth_store_script_read(req, script, cb, nkeys, argc, argv, lens);
}

/* ---- GET /api/entities/{id}/members/{address}/progress ---- */

typedef struct member_req {
    char id[IDS_SIZE];
    char addr[43];
    long limit;
} member_req;

/* A level's thresholds as the Level JSON gives them. */
static json_t *level_get(json_t *lv, const char *key)
{
    return json_object_get(lv, key);
}

static int cmp_skill(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *cx = json_string_value(json_object_get(x, "createdAt"));
    const char *cy = json_string_value(json_object_get(y, "createdAt"));
    int c = strcmp(cx ? cx : "", cy ? cy : "");
    if (c)
        return c;
    const char *ix = json_string_value(json_object_get(x, "id"));
    const char *iy = json_string_value(json_object_get(y, "id"));
    return strcmp(ix ? ix : "", iy ? iy : "");
}

static int64_t reply_int(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type != REDIS_REPLY_STRING || !r->len)
        return 0;
    errno = 0;
    char *end;
    long long v = strtoll(r->str, &end, 10);
    return errno || *end ? 0 : (int64_t)v;
}

/* Renders the skills part: the member's skills with a score above 0, in the entity's skill
 * order (createdAt, then id), each with its name. */
static json_t *render_skills(const redisReply *list, json_t *scores)
{
    json_t *out = json_array();
    size_t n = 0;
    json_t **items = list->elements ? calloc(list->elements, sizeof *items) : NULL;
    for (size_t i = 0; i < list->elements && items; i++) {
        const redisReply *s = list->element[i];
        if (s->type != REDIS_REPLY_STRING)
            continue;
        json_t *skill = json_loadb(s->str, s->len, 0, NULL);
        const char *sid = json_string_value(json_object_get(skill, "id"));
        json_t *score = sid ? json_object_get(scores, sid) : NULL;
        if (!json_is_object(skill) || !score || json_integer_value(score) <= 0) {
            json_decref(skill);
            continue;
        }
        items[n++] = skill;
    }
    if (n > 1)
        qsort(items, n, sizeof *items, cmp_skill);
    for (size_t i = 0; i < n; i++) {
        const char *sid = json_string_value(json_object_get(items[i], "id"));
        const char *name = json_string_value(json_object_get(items[i], "name"));
        json_array_append_new(out,
                              json_pack("{s:s,s:s,s:O}", "skillId", sid, "name", name ? name : "",
                                        "score", json_object_get(scores, sid)));
        json_decref(items[i]);
    }
    free(items);
    return out;
}

/* One level of the answer: reached (current thresholds; a passed endsAt counts only a
 * reachedAt recorded before it), reachedAt, and what is missing. Sets *reached. */
static json_t *render_level(json_t *lv, int64_t xp, json_t *scores, json_t *reached_at, int64_t now,
                            bool *reached)
{
    const char *id = json_string_value(level_get(lv, "id"));
    const char *name = json_string_value(level_get(lv, "name"));
    json_int_t need_xp = json_integer_value(level_get(lv, "XP"));
    json_t *ids = level_get(lv, "skillIds"), *need = level_get(lv, "scores");
    json_t *missing_skills = json_array();
    size_t i;
    json_t *sid;
    json_array_foreach(ids, i, sid)
    {
        const char *s = json_string_value(sid);
        json_int_t want = json_integer_value(json_array_get(need, i));
        json_int_t have = s ? json_integer_value(json_object_get(scores, s)) : 0;
        if (s && have < want)
            json_array_append_new(missing_skills,
                                  json_pack("{s:s,s:I,s:I}", "skillId", s, "need", (json_int_t)want,
                                            "have", (json_int_t)have));
    }
    json_int_t missing_xp = need_xp > xp ? need_xp - xp : 0;
    bool ok = missing_xp == 0 && json_array_size(missing_skills) == 0;
    json_t *at = id ? json_object_get(reached_at, id) : NULL;
    int64_t at_ms = at ? json_integer_value(at) : 0;
    const char *ends = json_string_value(level_get(lv, "endsAt"));
    int64_t ends_ms;
    if (ok && ends && isotime_parse(ends, strlen(ends), &ends_ms) == 0 && ends_ms <= now)
        ok = at && at_ms < ends_ms;
    *reached = ok;
    char iso[ISOTIME_STRING_SIZE];
    if (at)
        isotime_format(at_ms, iso);
    return json_pack("{s:s,s:s,s:I,s:b,s:o,s:{s:I,s:o}}", "id", id ? id : "", "name",
                     name ? name : "", "XP", need_xp, "reached", (int)ok, "reachedAt",
                     at ? json_string(iso) : json_null(), "missing", "xp", missing_xp, "skills",
                     missing_skills);
}

static void on_progress(void *data, int status, redisReply *r)
{
    request *req = data;
    member_req *m = req->state;
    if (respond_store_failed(req, status, r))
        return;
    /* {isEnabled, public, role, self, prog, rank, levels, skills, known} */
    if (!script_access(req, r, 9, !strcmp(req->caller, m->addr)))
        return;
    const redisReply *prog = r->element[4], *rank = r->element[5], *levels = r->element[6],
                     *skills = r->element[7], *known = r->element[8];
    if (prog->type != REDIS_REPLY_ARRAY || rank->type != REDIS_REPLY_INTEGER ||
        levels->type != REDIS_REPLY_ARRAY || skills->type != REDIS_REPLY_ARRAY ||
        known->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "progress: unexpected reply");
        return;
    }
    if (strcmp(known->str, "1") != 0) {
        request_fail(req, 404, "not_found", "No such member.", NULL);
        return;
    }
    int64_t xp = 0;
    json_t *scores = json_object(), *reached_at = json_object();
    for (size_t i = 0; i + 1 < prog->elements; i += 2) {
        const redisReply *k = prog->element[i], *v = prog->element[i + 1];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        if (!strcmp(k->str, "xp"))
            xp = reply_int(v);
        else if (!strncmp(k->str, "s:", 2))
            json_object_set_new(scores, k->str + 2, json_integer(reply_int(v)));
        else if (!strncmp(k->str, "r:", 2))
            json_object_set_new(reached_at, k->str + 2, json_integer(reply_int(v)));
    }
    if (xp < 0)
        xp = 0;
    int64_t now = isotime_now_ms();
    json_t *level_list = json_array();
    const char *top = NULL;
    for (size_t i = 0; i < levels->elements; i++) {
        const redisReply *l = levels->element[i];
        json_t *lv = l->type == REDIS_REPLY_STRING ? json_loadb(l->str, l->len, 0, NULL) : NULL;
        if (!json_is_object(lv) || !json_is_string(level_get(lv, "id"))) {
            json_decref(lv);
            continue;
        }
        bool reached;
        json_t *out = render_level(lv, xp, scores, reached_at, now, &reached);
        json_decref(lv);
        if (!out)
            continue;
        json_array_append_new(level_list, out);
        /* Levels come by XP, then id: the last reached is the highest. */
        if (reached)
            top = json_string_value(json_object_get(out, "id"));
    }
    json_t *body = json_object();
    json_object_set_new(body, "member", json_string(m->addr));
    json_object_set_new(body, "xp", json_integer(xp));
    json_object_set_new(body, "rank",
                        xp > 0 && rank->integer > 0 ? json_integer(rank->integer) : json_null());
    json_object_set_new(body, "skills", render_skills(skills, scores));
    json_object_set_new(body, "levels", level_list);
    json_object_set_new(body, "level", top ? json_string(top) : json_null());
    json_decref(scores);
    json_decref(reached_at);
    json_t *out = respond_ok();
    json_object_set_new(out, "data", body);
    request_reply(req, 200, out);
}

void progress_get(request *req)
{
    member_req *m = arena_alloc(&req->pool, sizeof *m);
    if (!m) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!path_member(req, m->id, m->addr))
        return;
    req->state = m;
    entity_keys k;
    keys_entity(&k, m->id);
    const char *argv[] = {k.entity, k.owners,      k.admins,    k.members,
                          k.skills, k.level_order, req->caller, m->addr};
    run_script(req, LUA_PROGRESS, on_progress, 6, argv, 8);
}

/* ---- GET /api/entities/{id}/members/{address}/contributions ---- */

static bool valid_contrib_entry(const char *s, size_t len)
{
    return len == CONTRIB_ENTRY_LEN && all_digits(s, 16) && s[16] == ':' &&
           ids_valid(s + 17, IDS_SIZE - 1, 'k');
}

static void on_contributions(void *data, int status, redisReply *r)
{
    request *req = data;
    member_req *m = req->state;
    if (respond_store_failed(req, status, r))
        return;
    /* {isEnabled, public, role, known, Contribution JSON..., next cursor} */
    if (!script_access(req, r, 5, !strcmp(req->caller, m->addr)))
        return;
    const redisReply *known = r->element[3], *next = r->element[r->elements - 1];
    if (known->type != REDIS_REPLY_STRING || next->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "contributions: unexpected reply");
        return;
    }
    if (strcmp(known->str, "1") != 0) {
        request_fail(req, 404, "not_found", "No such member.", NULL);
        return;
    }
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    bool first = true;
    for (size_t i = 4; i + 1 < r->elements; i++) {
        const redisReply *c = r->element[i];
        /* Stored as the API returns it (the write scripts render it with cjson). */
        if (c->type != REDIS_REPLY_STRING || !c->len || c->str[0] != '{')
            continue;
        if (!first)
            buf_append(b, ",", 1);
        buf_append(b, c->str, c->len);
        first = false;
    }
    buf_append(b, "]", 1);
    append_cursor(b, next, CONTRIB_ENTRY_LEN);
    respond_send(req, 200, b);
}

void contributions_get(request *req)
{
    member_req *m = arena_alloc(&req->pool, sizeof *m);
    char *cursor = arena_alloc(&req->pool, CONTRIB_ENTRY_LEN + 1);
    if (!m || !cursor) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!path_member(req, m->id, m->addr) || !query_limit(req, 100, 20, &m->limit) ||
        !query_cursor(req, CONTRIB_ENTRY_LEN, valid_contrib_entry, cursor))
        return;
    req->state = m;
    entity_keys k;
    keys_entity(&k, m->id);
    char contribs[KEYS_ENTITY_SIZE + 16], limit[24];
    snprintf(contribs, sizeof contribs, "%s:contribs", k.entity);
    snprintf(limit, sizeof limit, "%ld", m->limit);
    const char *argv[] = {k.entity,    k.owners, k.admins, k.members, contribs,
                          req->caller, m->addr,  cursor,   limit,     is_platform(req) ? "1" : "0"};
    run_script(req, LUA_CONTRIB_LIST, on_contributions, 5, argv, 10);
}

/* ---- GET /api/entities/{id}/leaderboard ---- */

static bool valid_board_entry(const char *s, size_t len)
{
    return len == BOARD_ENTRY_LEN && all_digits(s, 16) && s[16] == ':' && s[17] == '0' &&
           s[18] == 'x' && lower_hex(s + 19, 40);
}

static void on_leaderboard(void *data, int status, redisReply *r)
{
    request *req = data;
    if (respond_store_failed(req, status, r))
        return;
    /* {isEnabled, public, role, (address, value, rank)..., next cursor} */
    if (!script_access(req, r, 4, false))
        return;
    const redisReply *next = r->element[r->elements - 1];
    if ((r->elements - 4) % 3 != 0 || next->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    bool first = true;
    for (size_t i = 3; i + 3 < r->elements; i += 3) {
        const redisReply *a = r->element[i], *v = r->element[i + 1], *rank = r->element[i + 2];
        if (a->type != REDIS_REPLY_STRING || a->len != 42 || a->str[0] != '0' || a->str[1] != 'x' ||
            !lower_hex(a->str + 2, 40) || v->type != REDIS_REPLY_STRING ||
            !all_digits(v->str, v->len) || v->len > 16 || rank->type != REDIS_REPLY_INTEGER)
            continue;
        if (!first)
            buf_append(b, ",", 1);
        first = false;
        buf_append_str(b, "{\"rank\":");
        buf_append_uint(b, (unsigned long long)rank->integer);
        buf_append_str(b, ",\"member\":\"");
        buf_append(b, a->str, a->len);
        buf_append_str(b, "\",\"value\":");
        buf_append(b, v->str, v->len);
        buf_append(b, "}", 1);
    }
    buf_append(b, "]", 1);
    append_cursor(b, next, BOARD_ENTRY_LEN);
    respond_send(req, 200, b);
}

void leaderboard_get(request *req)
{
    char id[IDS_SIZE];
    char *cursor = arena_alloc(&req->pool, BOARD_ENTRY_LEN + 1);
    if (!cursor) {
        request_fail_internal(req, "out of memory");
        return;
    }
    long limit;
    if (!entity_path_id(req, id))
        return;
    size_t len;
    const char *by = request_param(req, "by", &len);
    if (!by || !len)
        by = "xp";
    else if (!(len == 2 && !memcmp(by, "xp", 2)) && !ids_valid(by, len, 's')) {
        request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
        return;
    }
    if (!query_limit(req, 100, 20, &limit) ||
        !query_cursor(req, BOARD_ENTRY_LEN, valid_board_entry, cursor))
        return;
    entity_keys k;
    keys_entity(&k, id);
    char lim[24];
    snprintf(lim, sizeof lim, "%ld", limit);
    const char *argv[] = {k.entity,    k.owners, k.admins, k.members, k.skills,
                          req->caller, by,       cursor,   lim,       is_platform(req) ? "1" : "0"};
    run_script(req, LUA_LEADERBOARD, on_leaderboard, 5, argv, 10);
}

/* ---- GET /api/entities/{id}/events ---- */

/* A stream id "<ms>-<seq>", each part 1 to 20 digits within 64 bits. */
static bool valid_event_id(const char *s, size_t len)
{
    const char *dash = memchr(s, '-', len);
    if (!dash || len > EVENT_ID_MAX)
        return false;
    const char *parts[2] = {s, dash + 1};
    size_t lens[2] = {(size_t)(dash - s), len - (size_t)(dash - s) - 1};
    for (int i = 0; i < 2; i++) {
        if (!all_digits(parts[i], lens[i]) || lens[i] > 20)
            return false;
        if (lens[i] == 20 && memcmp(parts[i], "18446744073709551615", 20) > 0)
            return false;
    }
    return true;
}

static void on_events(void *data, int status, redisReply *r)
{
    request *req = data;
    long limit = *(long *)req->state;
    if (respond_store_failed(req, status, r))
        return;
    /* EXEC: {HMGET id isEnabled public, SISMEMBER owners, SISMEMBER admins, XRANGE} */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 3 ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_INTEGER ||
        r->element[3]->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "events: unexpected reply");
        return;
    }
    const redisReply *f = r->element[0];
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return;
    }
    bool enabled = entity_flag(f->element[1]), owner = r->element[1]->integer != 0,
         admin = r->element[2]->integer != 0;
    if (!is_platform(req)) {
        if (!enabled && !owner) {
            request_fail(req, 404, "not_found", "No such entity.", NULL);
            return;
        }
        if (!owner && !admin) {
            request_fail(req, 403, "forbidden",
                         "Only the entity's owners and admins may read its events.", NULL);
            return;
        }
    }
    const redisReply *list = r->element[3];
    size_t n = list->elements < (size_t)limit ? list->elements : (size_t)limit;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    const redisReply *last = NULL;
    size_t skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING ||
            !valid_event_id(e->element[0]->str, e->element[0]->len) ||
            e->element[1]->type != REDIS_REPLY_ARRAY) {
            skipped++;
            continue;
        }
        const redisReply *fields = e->element[1], *type = NULL, *at = NULL, *actor = NULL,
                         *payload = NULL;
        for (size_t j = 0; j + 1 < fields->elements; j += 2) {
            const redisReply *k = fields->element[j], *v = fields->element[j + 1];
            if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
                continue;
            if (!strcmp(k->str, "type"))
                type = v;
            else if (!strcmp(k->str, "at"))
                at = v;
            else if (!strcmp(k->str, "actor"))
                actor = v;
            else if (!strcmp(k->str, "data"))
                payload = v;
        }
        if (last)
            buf_append(b, ",", 1);
        last = e->element[0];
        buf_append_str(b, "{\"id\":\"");
        buf_append(b, last->str, last->len);
        buf_append_str(b, "\",\"type\":\"");
        if (type)
            buf_append_json_escaped(b, type->str, type->len);
        buf_append_str(b, "\",\"at\":\"");
        if (at)
            buf_append_json_escaped(b, at->str, at->len);
        buf_append_str(b, "\",\"actor\":");
        if (actor && actor->len) {
            buf_append(b, "\"", 1);
            buf_append_json_escaped(b, actor->str, actor->len);
            buf_append(b, "\"", 1);
        } else {
            buf_append_str(b, "null");
        }
        buf_append_str(b, ",\"data\":");
        /* The object the write script stored as text, embedded as JSON once it parses. */
        json_t *obj = payload ? json_loadb(payload->str, payload->len, 0, NULL) : NULL;
        if (json_is_object(obj)) {
            buf_append(b, payload->str, payload->len);
        } else {
            buf_append_str(b, "{}");
            skipped += payload != NULL;
        }
        json_decref(obj);
        buf_append(b, "}", 1);
    }
    if (skipped) {
        buf *line = log_begin(LOG_WARN, "events page: malformed entries");
        if (line) {
            log_int(line, "skipped", (int64_t)skipped);
            log_end(line);
        }
    }
    buf_append_str(b, "],\"nextCursor\":");
    if (list->elements > (size_t)limit && n > 0) {
        const redisReply *e = list->element[n - 1];
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
            e->element[0]->type == REDIS_REPLY_STRING &&
            valid_event_id(e->element[0]->str, e->element[0]->len)) {
            buf_append(b, "\"", 1);
            buf_append(b, e->element[0]->str, e->element[0]->len);
            buf_append_str(b, "\"}");
        } else {
            buf_append_str(b, "null}");
        }
    } else {
        buf_append_str(b, "null}");
    }
    respond_send(req, 200, b);
}

void events_get(request *req)
{
    char id[IDS_SIZE];
    long *limit = arena_alloc(&req->pool, sizeof *limit);
    if (!limit) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, id) || !query_limit(req, 1000, 100, limit))
        return;
    size_t len;
    const char *after = request_param(req, "after", &len);
    char start[EVENT_ID_MAX + 2] = "-";
    if (after && !len)
        after = NULL; /* empty: omitted, as an empty cursor elsewhere */
    if (after) {
        if (!valid_event_id(after, len)) {
            request_fail_field(req, "after", "after must be an event id (<ms>-<seq>).");
            return;
        }
        snprintf(start, sizeof start, "(%s", after);
    }
    req->state = limit;
    entity_keys k;
    keys_entity(&k, id);
    char events[KEYS_ENTITY_SIZE + 16], count[24];
    snprintf(events, sizeof events, "%s:events", k.entity);
    snprintf(count, sizeof count, "%ld", *limit + 1);
    /* Nothing follows the last possible id (which "(" cannot step past): an empty range. */
    const char *end = "+";
    if (after && !strcmp(after, "18446744073709551615-18446744073709551615"))
        memcpy(start, "+", 2), end = "-";
    const char *access[] = {"HMGET", k.entity, "id", "isEnabled", "public"};
    size_t alens[] = {5, k.entity_len, 2, 9, 6};
    const char *own[] = {"SISMEMBER", k.owners, req->caller};
    size_t olens[] = {9, k.owners_len, strlen(req->caller)};
    const char *adm[] = {"SISMEMBER", k.admins, req->caller};
    size_t dlens[] = {9, k.admins_len, strlen(req->caller)};
    const char *range[] = {"XRANGE", events, start, end, "COUNT", count};
    size_t rlens[] = {6, strlen(events), strlen(start), 1, 5, strlen(count)};
    store_cmd cmds[] = {{5, access, alens}, {3, own, olens}, {3, adm, dlens}, {6, range, rlens}};
    store_exec(req->app->store, on_events, req, 4, cmds);
}
