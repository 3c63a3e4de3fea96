/* handlers_progress: member progression, the read side (CONTRACT §5): a member's progress and
 * contributions, the leaderboards and the event feed. Each is one round trip to Redis, one
 * MULTI … EXEC (progress.lua inside it for a member's progress, plain commands for the others)
 * or a read script (contrib_list.lua). Progress and leaderboard pages go through the read
 * cache. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "auth/auth.h"
#include "api/entity.h"
#include "api/handlers.h"
#include "api/progress.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"
#include "cache/readcache.h"

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
    if (next && next->type == REDIS_REPLY_STRING && next->len == entry_len) {
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

/* A progression read's key in the read cache (store_read_exec_as): the route's letter, then
 * every input its commands are built from (at most five, each at most 64 bytes: checked ids,
 * addresses, a board entry, a limit), each after its length, so that no two inputs run
 * together. A hit then costs a lookup of about a hundred bytes, not of the framed transaction;
 * the caller's role still comes from the kept answer of this caller's own lookups. */
typedef struct read_desc {
    size_t len;
    char s[1 + 5 * (1 + 64)];
} read_desc;

static void desc_add(read_desc *d, const char *s, size_t len)
{
    d->s[d->len++] = (char)len;
    memcpy(d->s + d->len, s, len);
    d->len += len;
}

/* ---- GET /api/entities/{id}/members/{address}/progress ---- */

/* Progress and leaderboard pages are one transaction each, the caller's role lookups inside
 * (CONTRACT §5: one round trip, also on a private entity), read through the read cache. */

/* The read rule over {id, isEnabled, public, ...} and the caller's role; or the member
 * themself on an enabled entity. */
static entity_read member_access(request *req, const redisReply *f, const redisReply *const *roles,
                                 bool self)
{
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return ENTITY_READ_ANSWERED;
    }
    int role = roles[0]->integer   ? ROLE_OWNER
               : roles[1]->integer ? ROLE_ADMIN
               : roles[2]->integer ? ROLE_MEMBER
                                   : ROLE_NONE;
    bool enabled = entity_flag(f->element[1]), is_public = entity_flag(f->element[2]);
    int rule = entity_read_rule(enabled, is_public, role, is_platform(req), req->signed_in, false);
    if (rule == 403 && self)
        rule = 0;
    if (rule == 0)
        return ENTITY_READ_OK;
    entity_fail_read(req, rule);
    return ENTITY_READ_ANSWERED;
}

/* Checks a read's EXEC reply: {the read's first reply, the role lookups, the rest}, nreplies
 * in all, the first an array of at least `min` whose first three are {id, isEnabled, public}. */
static entity_read read_reply(request *req, int status, const redisReply *r, size_t nreplies,
                              size_t min, bool self)
{
    if (respond_store_failed(req, status, (redisReply *)r))
        return ENTITY_READ_ANSWERED;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == nreplies &&
        r->element[0]->type == REDIS_REPLY_ERROR) {
        /* a script's error inside the transaction (NOSCRIPT after a flush: 503, and reloaded) */
        respond_store_failed(req, STORE_OK, r->element[0]);
        return ENTITY_READ_ANSWERED;
    }
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == nreplies &&
              r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 3;
    for (int i = 1; ok && i <= ENTITY_ROLE_CMDS; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (ok && r->element[0]->element[0]->type != REDIS_REPLY_NIL)
        ok = r->element[0]->elements >= min;
    if (!ok) {
        request_fail_internal(req, "progression read: unexpected reply");
        return ENTITY_READ_ANSWERED;
    }
    return member_access(req, r->element[0], (const redisReply *const *)r->element + 1, self);
}

static int64_t parse_int(const char *s, size_t n)
{
    int64_t v = 0;
    bool neg = n > 0 && s[0] == '-';
    for (size_t i = neg; i < n && i < 19; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return neg ? -v : v;
}

/* A signed integer, without printf: these reads render dozens of numbers per answer. */
static void append_int(buf *b, int64_t v)
{
    if (v < 0) {
        buf_append(b, "-", 1);
        buf_append_uint(b, (unsigned long long)-(v + 1) + 1);
        return;
    }
    buf_append_uint(b, (unsigned long long)v);
}

/* A member's prog hash (keys.h): xp, "s:<skill id>" scores, "r:<level id>" reachedAt. */
typedef struct prog_view {
    const redisReply *flat;
    int64_t xp;
} prog_view;

/* The value of field "<kind>:<id>" in the prog hash, and whether it is there. */
static bool prog_get(const prog_view *p, char kind, const char *id, size_t idlen, int64_t *out)
{
    for (size_t i = 0; i + 1 < p->flat->elements; i += 2) {
        const redisReply *k = p->flat->element[i], *v = p->flat->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == idlen + 2 && k->str[0] == kind &&
            k->str[1] == ':' && !memcmp(k->str + 2, id, idlen) && v->type == REDIS_REPLY_STRING) {
            *out = parse_int(v->str, v->len);
            return true;
        }
    }
    *out = 0;
    return false;
}

/* Splits s (len n) at the first `sep`: the part before is returned, *rest moves past it. */
static slice next_field(slice *rest, char sep)
{
    const char *at = memchr(rest->s, sep, rest->len);
    slice out = {rest->s, at ? (size_t)(at - rest->s) : rest->len};
    size_t skip = at ? out.len + 1 : out.len;
    rest->s += skip;
    rest->len -= skip;
    return out;
}

/* The skills part: the member's skills with a score above 0, in skill order, with names. */
static void render_skill_lines(buf *b, slice tpl, const prog_view *p)
{
    bool first = true;
    while (tpl.len) {
        slice line = next_field(&tpl, '\n');
        if (line.len < 2 || line.s[0] != 'S' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        slice id = next_field(&line, '\t'), name = line;
        int64_t score;
        if (!prog_get(p, 's', id.s, id.len, &score) || score <= 0 || !name.len)
            continue;
        buf_append_str(b, first ? "{\"skillId\":\"" : ",{\"skillId\":\"");
        buf_append(b, id.s, id.len);
        buf_append_str(b, "\",\"name\":");
        buf_append(b, name.s, name.len); /* a JSON string as stored */
        buf_append_str(b, ",\"score\":");
        append_int(b, score);
        buf_append(b, "}", 1);
        first = false;
    }
}

/* The levels part, and the id of the highest reached (by XP, then id: the last) into *top.
 * Reached: the member's XP and every score at least the level's (current thresholds); a passed
 * endsAt counts only a reachedAt recorded before it. */
static void render_level_lines(buf *b, slice tpl, const prog_view *p, int64_t now, slice *top,
                               int64_t *until)
{
    bool first = true;
    *top = (slice){NULL, 0};
    while (tpl.len) {
        slice line = next_field(&tpl, '\n');
        if (line.len < 2 || line.s[0] != 'L' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        slice col = next_field(&line, '\t'), xps = next_field(&line, '\t'),
              ends = next_field(&line, '\t'), name = next_field(&line, '\t'), need = line;
        /* The column is the level id, then ":<generation>" once a level of that id was deleted;
         * the whole column names the reachedAt field (_prelude.lua, progtpl_build). */
        slice gen = col, id = next_field(&gen, ':');
        if (!id.len || !name.len)
            continue;
        int64_t need_xp = parse_int(xps.s, xps.len);
        int64_t missing_xp = need_xp > p->xp ? need_xp - p->xp : 0;
        buf_append_str(b, first ? "{\"id\":\"" : ",{\"id\":\"");
        first = false;
        buf_append(b, id.s, id.len);
        buf_append_str(b, "\",\"name\":");
        buf_append(b, name.s, name.len);
        /* "reached" comes first and depends on every threshold: judged in a first pass. */
        bool ok = missing_xp == 0;
        for (slice n = need; ok && n.len;) {
            slice sid = next_field(&n, ' '), sc = next_field(&n, ' ');
            int64_t have;
            prog_get(p, 's', sid.s, sid.len, &have);
            ok = !sid.len || have >= parse_int(sc.s, sc.len);
        }
        int64_t at_ms, ends_ms;
        bool at = prog_get(p, 'r', col.s, col.len, &at_ms);
        bool ends_ok = ends.len && isotime_parse(ends.s, ends.len, &ends_ms) == 0;
        if (ok && ends_ok && ends_ms <= now)
            ok = at && at_ms < ends_ms;
        if (ends_ok && ends_ms > now && ends_ms < *until)
            *until = ends_ms; /* "reached" may change then */
        buf_append_str(b, ",\"XP\":");
        append_int(b, need_xp);
        buf_append_str(b, ok ? ",\"reached\":true,\"reachedAt\":"
                             : ",\"reached\":false,\"reachedAt\":");
        if (at) {
            char iso[ISOTIME_STRING_SIZE];
            isotime_format(at_ms, iso);
            buf_append(b, "\"", 1);
            buf_append(b, iso, ISOTIME_STRING_SIZE - 1);
            buf_append(b, "\"", 1);
        } else {
            buf_append_str(b, "null");
        }
        buf_append_str(b, ",\"missing\":{\"xp\":");
        append_int(b, missing_xp);
        buf_append_str(b, ",\"skills\":[");
        bool first_missing = true;
        while (need.len) {
            slice sid = next_field(&need, ' '), sc = next_field(&need, ' ');
            int64_t want = parse_int(sc.s, sc.len), have;
            prog_get(p, 's', sid.s, sid.len, &have);
            if (!sid.len || have >= want)
                continue;
            buf_append_str(b, first_missing ? "{\"skillId\":\"" : ",{\"skillId\":\"");
            first_missing = false;
            buf_append(b, sid.s, sid.len);
            buf_append_str(b, "\",\"need\":");
            append_int(b, want);
            buf_append_str(b, ",\"have\":");
            append_int(b, have);
            buf_append(b, "}", 1);
        }
        buf_append_str(b, "]}}");
        if (ok)
            *top = id;
    }
}

static void on_progress(void *data, int status, redisReply *r)
{
    request *req = data;
    member_req *m = req->state;
    const redisReply *f = progress_read_check(req, status, r, 0, m);
    if (!f)
        return;
    const redisReply *prog = f->element[4], *rank = f->element[5], *tpl = f->element[6];
    /* A repeated read: the answer and its rendering both kept by the read cache. */
    int64_t now = isotime_now_ms(), until = INT64_MAX;
    size_t kept_len;
    const char *kept = readcache_rendered(req->app->reads, r, now, &kept_len);
    if (kept) {
        slice part = {kept, kept_len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    prog_view p = {prog, 0};
    for (size_t i = 0; i + 1 < prog->elements; i += 2) {
        const redisReply *k = prog->element[i], *v = prog->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == 2 && !memcmp(k->str, "xp", 2) &&
            v->type == REDIS_REPLY_STRING)
            p.xp = parse_int(v->str, v->len);
    }
    if (p.xp < 0)
        p.xp = 0;
    slice t = {tpl->str, tpl->len}, top;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":{\"member\":\"");
    buf_append(b, m->addr, strlen(m->addr));
    buf_append_str(b, "\",\"xp\":");
    append_int(b, p.xp);
    buf_append_str(b, ",\"rank\":");
    if (p.xp > 0 && rank->integer > 0)
        append_int(b, rank->integer);
    else
        buf_append_str(b, "null");
    buf_append_str(b, ",\"skills\":[");
    render_skill_lines(b, t, &p);
    buf_append_str(b, "],\"levels\":[");
    render_level_lines(b, t, &p, now, &top, &until);
    buf_append_str(b, "],\"level\":");
    if (top.len) {
        buf_append(b, "\"", 1);
        buf_append(b, top.s, top.len);
        buf_append_str(b, "\"}}");
    } else {
        buf_append_str(b, "null}}");
    }
    readcache_keep_rendered(req->app->reads, r, until, b->data, b->len);
    respond_send(req, 200, b);
}

bool progress_read_send(request *req, char letter, const store_cmd *extra, int nextra, store_cb cb,
                        member_req *m)
{
    if (!path_member(req, m->id, m->addr))
        return false;
    entity_keys k;
    keys_entity(&k, m->id);
    char prog[KEYS_PROG_SIZE], board[KEYS_BOARD_SIZE], gone[KEYS_BOARD_SIZE];
    size_t plen = keys_prog(prog, m->id, m->addr), blen = keys_board(board, m->id, "xp");
    size_t glen = keys_board_gone(gone, m->id, "xp");
    const char *argv[] = {"EVALSHA",     store_script_sha(req->app->store, LUA_PROGRESS),
                          "7",           k.entity,
                          k.members,     prog,
                          board,         k.skill_order,
                          k.level_order, gone,
                          m->addr};
    size_t lens[] = {7,
                     40,
                     1,
                     k.entity_len,
                     k.members_len,
                     plen,
                     blen,
                     k.skill_order_len,
                     k.level_order_len,
                     glen,
                     strlen(m->addr)};
    store_cmd cmds[1 + ENTITY_ROLE_CMDS + PROGRESS_READ_EXTRA_MAX] = {{11, argv, lens}};
    entity_role_lookup rl;
    entity_role_cmds(&rl, &k, req->caller, cmds + 1);
    for (int i = 0; i < nextra && i < PROGRESS_READ_EXTRA_MAX; i++)
        cmds[1 + ENTITY_ROLE_CMDS + i] = extra[i];
    read_desc d = {1, {letter}};
    desc_add(&d, m->id, strlen(m->id));
    desc_add(&d, m->addr, lens[10]);
    desc_add(&d, req->caller, strlen(req->caller));
    auth_store_exec_as(req, d.s, d.len, cb, 1 + ENTITY_ROLE_CMDS + nextra, cmds);
    return true;
}

const redisReply *progress_read_check(request *req, int status, redisReply *r, int nextra,
                                      const member_req *m)
{
    /* {{id, isEnabled, public, known, prog, rank, template}, roles, extra} */
    if (read_reply(req, status, r, (size_t)(1 + ENTITY_ROLE_CMDS + nextra), 7,
                   !strcmp(req->caller, m->addr)) != ENTITY_READ_OK)
        return NULL;
    const redisReply *f = r->element[0], *known = f->element[3], *prog = f->element[4],
                     *rank = f->element[5], *tpl = f->element[6];
    if (known->type != REDIS_REPLY_STRING || prog->type != REDIS_REPLY_ARRAY ||
        rank->type != REDIS_REPLY_INTEGER || tpl->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "progress: unexpected reply");
        return NULL;
    }
    if (strcmp(known->str, "1") != 0) {
        request_fail(req, 404, "not_found", "No such member.", NULL);
        return NULL;
    }
    return f;
}

void progress_get(request *req)
{
    member_req *m = request_state(req, sizeof *m);
    if (!m)
        return;
    progress_read_send(req, 'P', NULL, 0, on_progress, m);
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

/* A page is plain commands in one transaction, no script: the board entries carry their values
 * (keys.h), decoded here. The page's first rank comes from the cursor alone (the entry the last
 * page ended with): entries up to it, and entries with a higher value than its own.
 * A removed member's entries stay on the board until the sweeper takes them off (jobs/sweeper.h),
 * tombstoned in the board's gone zset: every count subtracts the same count of the gone zset,
 * and the page skips the gone entries, read in the same transaction over the same range (the
 * first `limit + 1` of them after the start cover every one among the page's `limit + 1` board
 * entries: each is a board entry too). When skipping leaves the page short while the board goes
 * on, further reads follow from the last entry seen, BOARD_MORE at a time, at most
 * BOARD_MORE_ROUNDS of them; past that the page is answered short, its cursor the last entry
 * seen (a cursor need not be a live entry: ranks after it count live entries only). */
#define BOARD_MORE        1000
#define BOARD_MORE_ROUNDS 4

typedef struct board_req {
    char id[IDS_SIZE];
    char by[IDS_SIZE]; /* "xp" or a skill id */
    char cursor[BOARD_ENTRY_LEN + 1];
    long limit;
    char (*kept)[BOARD_ENTRY_LEN]; /* the page's live entries read so far, up to limit + 1 */
    size_t nkept;
    long long higher, upto; /* with a cursor: live values above its own; live entries up to it */
    char last[BOARD_ENTRY_LEN + 1]; /* the last board entry read */
    bool more;                      /* the board may go on after it */
    int rounds;
} board_req;

static bool valid_board_entry(const char *s, size_t len)
{
    return len == BOARD_ENTRY_LEN && all_digits(s, 16) && s[16] == ':' && s[17] == '0' &&
           s[18] == 'x' && lower_hex(s + 19, 40);
}

/* A page's cursor is the entry it ended with, written compactly: the entry's 16 digits, then
 * its address's 40 hex digits, with nothing to decode (the hex of the whole entry, twice as
 * long, was a good part of a deep page's cost: parsed, decoded and hashed on every read). */
#define BOARD_CURSOR_LEN 56

/* Reads the optional `cursor` into the board entry it names (NUL-ended; "" when absent), or
 * answers 400 and returns false. The hex of a whole entry, which earlier releases issued, is
 * taken too. */
static bool board_cursor(request *req, char out[BOARD_ENTRY_LEN + 1])
{
    size_t len;
    const char *cp = request_param(req, "cursor", &len);
    out[0] = '\0';
    if (!cp || !len)
        return true;
    bool ok = true;
    if (len == BOARD_CURSOR_LEN) {
        memcpy(out, cp, 16);
        memcpy(out + 16, ":0x", 3);
        memcpy(out + 19, cp + 16, 40);
    } else {
        ok =
            len == 2 * BOARD_ENTRY_LEN && hex_decode(cp, len, (uint8_t *)out, BOARD_ENTRY_LEN) == 0;
    }
    if (!ok || !valid_board_entry(out, BOARD_ENTRY_LEN)) {
        out[0] = '\0';
        request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
        return false;
    }
    out[BOARD_ENTRY_LEN] = '\0';
    return true;
}

/* Appends the nextCursor member for a page that ended with the entry `next`, or null (NULL). */
static void append_board_cursor(buf *b, const char *next)
{
    if (!next) {
        buf_append_str(b, ",\"nextCursor\":null}");
        return;
    }
    buf_append_str(b, ",\"nextCursor\":\"");
    buf_append(b, next, 16);
    buf_append(b, next + 19, 40);
    buf_append(b, "\"}", 2);
}

/* The value of a board entry: 9999999999999999 - its first 16 digits. */
static uint64_t board_value(const char *entry)
{
    uint64_t inv = 0;
    for (int i = 0; i < 16; i++)
        inv = inv * 10 + (uint64_t)(entry[i] - '0');
    return 9999999999999999ULL - inv;
}

/* Lexicographic order of two strings (Redis's for equal scores). */
static int lex_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* Takes a read of the board (`page`, `fetched` asked for) and of its gone zset over the same
 * range: keeps the live entries, up to limit + 1, and notes the last entry read. Returns the
 * malformed entries skipped. */
static size_t board_collect(board_req *q, const redisReply *page, const redisReply *gone,
                            size_t fetched)
{
    size_t g = 0, skipped = 0;
    for (size_t i = 0; i < page->elements; i++) {
        const redisReply *e = page->element[i];
        if (e->type != REDIS_REPLY_STRING || !valid_board_entry(e->str, e->len)) {
            skipped++;
            continue;
        }
        memcpy(q->last, e->str, BOARD_ENTRY_LEN);
        q->last[BOARD_ENTRY_LEN] = '\0';
        int c = 1; /* the first gone entry not below e, against e */
        while (g < gone->elements) {
            const redisReply *x = gone->element[g];
            c = x->type == REDIS_REPLY_STRING ? lex_cmp(x->str, x->len, e->str, e->len) : -1;
            if (c >= 0)
                break;
            g++;
        }
        if (g < gone->elements && c == 0) {
            g++;
            continue; /* a removed member's, not swept yet */
        }
        if (q->nkept <= (size_t)q->limit)
            memcpy(q->kept[q->nkept++], e->str, BOARD_ENTRY_LEN);
    }
    q->more = page->elements >= fetched && q->last[0]; /* read on only after an entry */
    return skipped;
}

/* Renders the page from the entries kept (ranks from the cursor's counts) and answers. `r`: the
 * one reply the page came from, whose rendering the read cache may keep, or NULL. */
static void board_answer(request *req, const redisReply *r, size_t skipped)
{
    board_req *q = req->state;
    size_t shown = q->nkept < (size_t)q->limit ? q->nkept : (size_t)q->limit;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    const char *prev = q->cursor[0] ? q->cursor : NULL;
    long long rank = 1 + q->higher;
    for (size_t i = 0; i < shown; i++) {
        const char *e = q->kept[i];
        /* Competition ranks: a new value ranks after every live entry before it. */
        if (!prev || memcmp(prev, e, 16) != 0)
            rank = q->upto + (long long)i + 1;
        prev = e;
        if (i)
            buf_append(b, ",", 1);
        buf_append_str(b, "{\"rank\":");
        append_int(b, rank);
        buf_append_str(b, ",\"member\":\"");
        buf_append(b, e + 17, 42);
        buf_append_str(b, "\",\"value\":");
        buf_append_uint(b, (unsigned long long)board_value(e));
        buf_append(b, "}", 1);
    }
    if (skipped) {
        buf *line = log_begin(LOG_WARN, "leaderboard page: malformed entries");
        if (line) {
            log_int(line, "skipped", (int64_t)skipped);
            log_end(line);
        }
    }
    buf_append(b, "]", 1);
    const char *next = q->nkept > (size_t)q->limit ? q->kept[q->limit - 1]
                       : q->more && q->last[0]     ? q->last
                                                   : NULL;
    append_board_cursor(b, next);
    if (r)
        readcache_keep_rendered(req->app->reads, r, INT64_MAX, b->data, b->len);
    respond_send(req, 200, b);
}

static void board_read_more(request *req);

/* EXEC: {ZRANGEBYLEX board, ZRANGEBYLEX gone}, both from after the last entry read. */
static void on_board_more(void *data, int status, redisReply *r)
{
    request *req = data;
    board_req *q = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[1]->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    size_t skipped = board_collect(q, r->element[0], r->element[1], BOARD_MORE);
    if (q->nkept <= (size_t)q->limit && q->more && ++q->rounds < BOARD_MORE_ROUNDS) {
        board_read_more(req);
        return;
    }
    board_answer(req, NULL, skipped);
}

static void board_read_more(request *req)
{
    board_req *q = req->state;
    char board[KEYS_BOARD_SIZE], gone[KEYS_BOARD_SIZE], from[BOARD_ENTRY_LEN + 2], n[8];
    size_t blen = keys_board(board, q->id, q->by), glen = keys_board_gone(gone, q->id, q->by);
    from[0] = '(';
    memcpy(from + 1, q->last, BOARD_ENTRY_LEN + 1);
    int nlen = snprintf(n, sizeof n, "%d", BOARD_MORE);
    const char *range[] = {"ZRANGEBYLEX", board, from, "+", "LIMIT", "0", n};
    size_t rlens[] = {11, blen, BOARD_ENTRY_LEN + 1, 1, 5, 1, (size_t)nlen};
    const char *grange[] = {"ZRANGEBYLEX", gone, from, "+", "LIMIT", "0", n};
    size_t glens[] = {11, glen, BOARD_ENTRY_LEN + 1, 1, 5, 1, (size_t)nlen};
    store_cmd cmds[] = {{7, range, rlens}, {7, grange, glens}};
    store_exec(req->app->store, on_board_more, req, 2, cmds);
}

static void on_board(void *data, int status, redisReply *r)
{
    request *req = data;
    board_req *q = req->state;
    bool by_skill = strcmp(q->by, "xp") != 0, cursor = q->cursor[0] != '\0';
    /* {HMGET id isEnabled public, the role lookups, HEXISTS skills by (by a skill), ZRANGEBYLEX
     * of the board, the same of its gone zset, and with a cursor ZLEXCOUNT up to its value and
     * up to it, of the board, then of the gone zset} */
    size_t at = 1 + ENTITY_ROLE_CMDS, n = at + by_skill + 2 + (cursor ? 4 : 0);
    if (read_reply(req, status, r, n, 3, false) != ENTITY_READ_OK)
        return;
    if (by_skill) {
        const redisReply *has = r->element[at++];
        if (has->type != REDIS_REPLY_INTEGER || !has->integer) {
            request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
            return;
        }
    }
    size_t kept_len;
    const char *kept = readcache_rendered(req->app->reads, r, 0, &kept_len);
    if (kept) {
        slice part = {kept, kept_len};
        request_reply_parts(req, 200, &part, 1);
        return;
    }
    const redisReply *page = r->element[at], *gone = r->element[at + 1];
    bool counts = true;
    for (size_t i = 0; cursor && i < 4; i++)
        counts = counts && r->element[at + 2 + i]->type == REDIS_REPLY_INTEGER;
    if (page->type != REDIS_REPLY_ARRAY || gone->type != REDIS_REPLY_ARRAY || !counts) {
        request_fail_internal(req, "leaderboard: unexpected reply");
        return;
    }
    q->higher = q->upto = 0;
    if (cursor) {
        q->higher = r->element[at + 2]->integer - r->element[at + 4]->integer;
        q->upto = r->element[at + 3]->integer - r->element[at + 5]->integer;
    }
    q->nkept = 0;
    q->last[0] = '\0';
    size_t skipped = board_collect(q, page, gone, (size_t)q->limit + 1);
    if (q->nkept <= (size_t)q->limit && q->more) {
        q->rounds = 0;
        board_read_more(req); /* removed members' entries made the page short */
        return;
    }
    board_answer(req, r, skipped);
}

static void board_send(request *req)
{
    board_req *q = req->state;
    entity_keys k;
    keys_entity(&k, q->id);
    char board[KEYS_BOARD_SIZE], start[BOARD_ENTRY_LEN + 2], tie[19], upto[BOARD_ENTRY_LEN + 2],
        lim[24];
    size_t blen = keys_board(board, q->id, q->by), bylen = strlen(q->by);
    bool cursor = q->cursor[0] != '\0';
    /* Built by hand: printf is a good part of a cached page's cost. */
    start[0] = cursor ? '(' : '-';
    upto[0] = '[';
    memcpy(start + 1, q->cursor, BOARD_ENTRY_LEN + 1);
    memcpy(upto + 1, q->cursor, BOARD_ENTRY_LEN + 1);
    if (!cursor)
        start[1] = '\0';
    tie[0] = '(';
    memcpy(tie + 1, q->cursor, 16);
    tie[17] = ':';
    tie[18] = '\0';
    long l = q->limit + 1; /* 2 to 101 */
    size_t ln = 0;
    if (l >= 100)
        lim[ln++] = (char)('0' + l / 100);
    if (l >= 10)
        lim[ln++] = (char)('0' + l / 10 % 10);
    lim[ln++] = (char)('0' + l % 10);
    lim[ln] = '\0';
    const char *fields[] = {"HMGET", k.entity, "id", "isEnabled", "public"};
    size_t flens[] = {5, k.entity_len, 2, 9, 6};
    const char *has[] = {"HEXISTS", k.skills, q->by};
    size_t hlens[] = {7, k.skills_len, bylen};
    const char *range[] = {"ZRANGEBYLEX", board, start, "+", "LIMIT", "0", lim};
    size_t rlens[] = {11, blen, strlen(start), 1, 5, 1, strlen(lim)};
    const char *c1[] = {"ZLEXCOUNT", board, "-", tie};
    size_t c1lens[] = {9, blen, 1, strlen(tie)};
    const char *c2[] = {"ZLEXCOUNT", board, "-", upto};
    size_t c2lens[] = {9, blen, 1, strlen(upto)};
    char gone[KEYS_BOARD_SIZE];
    size_t glen = keys_board_gone(gone, q->id, q->by);
    const char *grange[] = {"ZRANGEBYLEX", gone, start, "+", "LIMIT", "0", lim};
    size_t grlens[] = {11, glen, strlen(start), 1, 5, 1, strlen(lim)};
    const char *g1[] = {"ZLEXCOUNT", gone, "-", tie};
    size_t g1lens[] = {9, glen, 1, strlen(tie)};
    const char *g2[] = {"ZLEXCOUNT", gone, "-", upto};
    size_t g2lens[] = {9, glen, 1, strlen(upto)};
    store_cmd cmds[1 + ENTITY_ROLE_CMDS + 8] = {{5, fields, flens}};
    int n = 1 + ENTITY_ROLE_CMDS;
    entity_role_lookup rl;
    entity_role_cmds(&rl, &k, req->caller, cmds + 1);
    if (strcmp(q->by, "xp") != 0)
        cmds[n++] = (store_cmd){3, has, hlens};
    cmds[n++] = (store_cmd){7, range, rlens};
    cmds[n++] = (store_cmd){7, grange, grlens};
    if (cursor) {
        cmds[n++] = (store_cmd){4, c1, c1lens};
        cmds[n++] = (store_cmd){4, c2, c2lens};
        cmds[n++] = (store_cmd){4, g1, g1lens};
        cmds[n++] = (store_cmd){4, g2, g2lens};
    }
    read_desc d = {1, {'B'}};
    desc_add(&d, q->id, strlen(q->id));
    desc_add(&d, q->by, bylen);
    desc_add(&d, lim, ln);
    desc_add(&d, q->cursor, cursor ? BOARD_ENTRY_LEN : 0);
    desc_add(&d, req->caller, strlen(req->caller));
    auth_store_exec_as(req, d.s, d.len, on_board, n, cmds);
}

void leaderboard_get(request *req)
{
    board_req *q = arena_alloc(&req->pool, sizeof *q);
    char(*kept)[BOARD_ENTRY_LEN] = arena_alloc(&req->pool, 101 * BOARD_ENTRY_LEN);
    if (!q || !kept) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, q->id))
        return;
    size_t len;
    const char *by = request_param(req, "by", &len);
    if (!by || !len) {
        memcpy(q->by, "xp", 3);
    } else if ((len == 2 && !memcmp(by, "xp", 2)) || ids_valid(by, len, 's')) {
        memcpy(q->by, by, len);
        q->by[len] = '\0';
    } else {
        request_fail_field(req, "by", "by must be xp or the id of one of the entity's skills.");
        return;
    }
    if (!query_limit(req, 100, 20, &q->limit) || !board_cursor(req, q->cursor))
        return;
    q->kept = kept;
    req->state = q;
    board_send(req);
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
