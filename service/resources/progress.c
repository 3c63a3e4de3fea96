/* progress: a member's progression, the read side (CONTRACT §5): its progress and its
 * contributions. Each is one round trip to Redis: a MULTI … EXEC with progress.lua inside it,
 * or a read script (contrib_list.lua). Progress goes through the read cache. The leaderboards
 * and the event feed are in leaderboard.c and events.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/progress.h"
#include "resources/progress_totals.h"
#include "resources/reads.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"
#include "cache/readcache.h"

/* A contribution index entry: "<createdAt ms, 16 digits>:k-<uuidv4>". */
#define CONTRIB_ENTRY_LEN (17 + IDS_SIZE - 1)

/* The longest entry a cursor names (append_cursor). */
#define CURSOR_ENTRY_MAX 64

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
    if (next && next->type == REDIS_REPLY_STRING && next->len == entry_len &&
        entry_len <= CURSOR_ENTRY_MAX) {
        char hex[2 * CURSOR_ENTRY_MAX + 1];
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
    int rule = entity_read_rule(enabled, is_public, role_of(r->element[2]), reads_is_platform(req),
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
    store_script_read(req->app->store, request_read_flags(req), script, cb, req, nkeys, argc, argv,
                      lens);
}

/* ---- GET /api/entities/{id}/members/{address}/progress ---- */

/* Progress is one transaction, the caller's role lookups inside (CONTRACT §5: one round trip,
 * also on a private entity), read through the read cache. */

/* A member's prog hash (keys.h): xp, "s:<skill id>" scores, "r:<level id>" reachedAt; and its
 * totals where the template has a tree (NULL for a flat list: each total is the own score). */
typedef struct prog_view {
    const redisReply *flat;
    int64_t xp;
    const skill_totals *tree;
} prog_view;

/* The value of field "<kind>:<id>" in the prog hash, and whether it is there. */
static bool prog_get(const prog_view *p, char kind, const char *id, size_t idlen, int64_t *out)
{
    for (size_t i = 0; i + 1 < p->flat->elements; i += 2) {
        const redisReply *k = p->flat->element[i], *v = p->flat->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == idlen + 2 && k->str[0] == kind &&
            k->str[1] == ':' && !memcmp(k->str + 2, id, idlen) && v->type == REDIS_REPLY_STRING) {
            *out = progress_parse_int(v->str, v->len);
            return true;
        }
    }
    *out = 0;
    return false;
}

/* The member's total in skill id: what a level's threshold is met by (CONTRACT §15). */
static int64_t prog_total(const prog_view *p, slice id)
{
    if (p->tree)
        return progress_total_of(p->tree, id);
    int64_t own;
    prog_get(p, 's', id.s, id.len, &own);
    return own;
}

static void append_skill(buf *b, slice id, slice name, int64_t score, int64_t total, bool first)
{
    buf_append_str(b, first ? "{\"skillId\":\"" : ",{\"skillId\":\"");
    buf_append(b, id.s, id.len);
    buf_append_str(b, "\",\"name\":");
    buf_append(b, name.s, name.len); /* a JSON string as stored */
    buf_append_str(b, ",\"score\":");
    reads_append_int(b, score);
    buf_append_str(b, ",\"total\":");
    reads_append_int(b, total);
    buf_append(b, "}", 1);
}

/* The skills part: the member's skills with a total above 0, in skill order (pre-order), with
 * names, own scores and totals. */
static void render_skill_lines(buf *b, slice tpl, const prog_view *p)
{
    bool first = true;
    if (p->tree) {
        for (size_t i = 0; i < p->tree->n; i++) {
            const tree_skill *sk = &p->tree->skills[i];
            if (sk->total <= 0 || !sk->name.len)
                continue;
            append_skill(b, sk->id, sk->name, sk->own, sk->total, first);
            first = false;
        }
        return;
    }
    while (tpl.len) {
        slice line = progress_next_field(&tpl, '\n');
        if (line.len < 2 || line.s[0] != 'S' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        /* "<id>\t<name>[\t<parent id>]": an earlier release's lines end at the name */
        slice id = progress_next_field(&line, '\t'), name = progress_next_field(&line, '\t');
        int64_t score;
        if (!prog_get(p, 's', id.s, id.len, &score) || score <= 0 || !name.len)
            continue;
        append_skill(b, id, name, score, score, first); /* flat: the total is the score */
        first = false;
    }
}

/* One L line of the template (lua/_prelude.lua, progtpl_build): "L\t<column>\t<XP>\t<endsAt>\t
 * <name as a JSON string>\t<skill id> <score>...[\t<place of a required level> ...]". */
typedef struct level_line {
    slice col, id, name, need, places;
    int64_t xp;
    bool own;     /* its own thresholds met (and, once endsAt passed, reached before it) */
    int8_t state; /* reached: -1 not judged yet, 0 no, 1 yes */
} level_line;

/* Cuts an L line (after "L\t") into *lv; false for a line without an id or a name. */
static bool level_line_cut(slice line, level_line *lv)
{
    lv->col = progress_next_field(&line, '\t');
    slice xps = progress_next_field(&line, '\t');
    progress_next_field(&line, '\t'); /* endsAt: judged by level_judge_own */
    lv->name = progress_next_field(&line, '\t');
    lv->need = progress_next_field(&line, '\t');
    lv->places = line;
    /* The column is the level id, then ":<generation>" once a level of that id was deleted;
     * the whole column names the reachedAt field (_prelude.lua, progtpl_build). */
    slice gen = lv->col;
    lv->id = progress_next_field(&gen, ':');
    lv->xp = progress_parse_int(xps.s, xps.len);
    lv->state = -1;
    return lv->id.len && lv->name.len;
}

/* Whether the member meets lv's own thresholds: its XP and every score at least the level's
 * (current thresholds); a passed endsAt counts only a reachedAt recorded before it. */
static bool level_judge_own(slice line, const level_line *lv, const prog_view *p, int64_t now,
                            int64_t *until)
{
    progress_next_field(&line, '\t');
    progress_next_field(&line, '\t');
    slice ends = progress_next_field(&line, '\t');
    bool ok = lv->xp <= p->xp;
    for (slice n = lv->need; ok && n.len;) {
        slice sid = progress_next_field(&n, ' '), sc = progress_next_field(&n, ' ');
        ok = !sid.len || prog_total(p, sid) >= progress_parse_int(sc.s, sc.len);
    }
    int64_t at_ms, ends_ms;
    bool at = prog_get(p, 'r', lv->col.s, lv->col.len, &at_ms);
    bool ends_ok = ends.len && isotime_parse(ends.s, ends.len, &ends_ms) == 0;
    if (ok && ends_ok && ends_ms <= now)
        ok = at && at_ms < ends_ms;
    if (ends_ok && ends_ms > now && ends_ms < *until)
        *until = ends_ms; /* "reached" may change then */
    return ok;
}

/* The next place of a places column, or -1 at its end (places out of range are skipped). */
static long level_next_place(slice *places, size_t n)
{
    while (places->len) {
        slice k = progress_next_field(places, ' ');
        int64_t v = progress_parse_int(k.s, k.len);
        if (k.len && v >= 0 && (uint64_t)v < n)
            return (long)v;
    }
    return -1;
}

/* Reached: its own thresholds met and every required level reached. The template's requires
 * hold no cycle (level_upsert.lua): each pass decides at least one level still undecided, so
 * at most n passes; without requires, the first decides all. */
static void level_judge_all(level_line *lv, size_t n)
{
    bool pending = true;
    for (size_t pass = 0; pending && pass <= n; pass++) {
        pending = false;
        for (size_t i = 0; i < n; i++) {
            if (lv[i].state >= 0)
                continue;
            int8_t state = lv[i].own;
            slice pl = lv[i].places;
            for (long k; state >= 0 && (k = level_next_place(&pl, n)) >= 0;)
                state = lv[k].state < 0 ? -1 : (int8_t)(state && lv[k].state);
            lv[i].state = state;
            pending |= state < 0;
        }
    }
}

static void append_id(buf *b, slice id, bool first)
{
    buf_append_str(b, first ? "\"" : ",\"");
    buf_append(b, id.s, id.len);
    buf_append(b, "\"", 1);
}

/* The levels part, and the id of the highest reached (by XP, then id: the last) into *top.
 * False when out of memory. */
static bool render_level_lines(request *req, buf *b, slice tpl, const prog_view *p, int64_t now,
                               slice *top, int64_t *until)
{
    *top = (slice){NULL, 0};
    size_t cap = 1;
    for (size_t i = 0; i < tpl.len; i++)
        cap += tpl.s[i] == '\n';
    level_line *lv = arena_alloc(&req->pool, cap * sizeof *lv);
    if (!lv)
        return false;
    /* Places in the requires column count every L line, so every one takes a place here. */
    size_t n = 0;
    while (tpl.len && n < cap) {
        slice line = progress_next_field(&tpl, '\n');
        if (line.len < 2 || line.s[0] != 'L' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        if (level_line_cut(line, &lv[n]))
            lv[n].own = level_judge_own(line, &lv[n], p, now, until);
        else
            lv[n].own = false, lv[n].id.len = 0;
        n++;
    }
    level_judge_all(lv, n);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const level_line *l = &lv[i];
        if (!l->id.len)
            continue;
        bool ok = l->state == 1, unlocked = true;
        buf_append_str(b, first ? "{\"id\":\"" : ",{\"id\":\"");
        first = false;
        buf_append(b, l->id.s, l->id.len);
        buf_append_str(b, "\",\"name\":");
        buf_append(b, l->name.s, l->name.len);
        buf_append_str(b, ",\"XP\":");
        reads_append_int(b, l->xp);
        buf_append_str(b, ",\"requires\":[");
        slice pl = l->places;
        for (long k, j = 0; (k = level_next_place(&pl, n)) >= 0; j++) {
            append_id(b, lv[k].id, j == 0);
            unlocked = unlocked && lv[k].state == 1;
        }
        buf_append_str(b, ok ? "],\"reached\":true" : "],\"reached\":false");
        buf_append_str(b, unlocked ? ",\"unlocked\":true,\"reachedAt\":"
                                   : ",\"unlocked\":false,\"reachedAt\":");
        int64_t at_ms;
        if (prog_get(p, 'r', l->col.s, l->col.len, &at_ms)) {
            char iso[ISOTIME_STRING_SIZE];
            isotime_format(at_ms, iso);
            buf_append(b, "\"", 1);
            buf_append(b, iso, ISOTIME_STRING_SIZE - 1);
            buf_append(b, "\"", 1);
        } else {
            buf_append_str(b, "null");
        }
        buf_append_str(b, ",\"missing\":{\"xp\":");
        reads_append_int(b, l->xp > p->xp ? l->xp - p->xp : 0);
        buf_append_str(b, ",\"skills\":[");
        bool first_missing = true;
        for (slice need = l->need; need.len;) {
            slice sid = progress_next_field(&need, ' '), sc = progress_next_field(&need, ' ');
            int64_t want = progress_parse_int(sc.s, sc.len), have = prog_total(p, sid);
            if (!sid.len || have >= want)
                continue;
            buf_append_str(b, first_missing ? "{\"skillId\":\"" : ",{\"skillId\":\"");
            first_missing = false;
            buf_append(b, sid.s, sid.len);
            buf_append_str(b, "\",\"need\":");
            reads_append_int(b, want);
            buf_append_str(b, ",\"have\":");
            reads_append_int(b, have);
            buf_append(b, "}", 1);
        }
        buf_append_str(b, "],\"levels\":[");
        pl = l->places;
        first_missing = true;
        for (long k; (k = level_next_place(&pl, n)) >= 0;) {
            if (lv[k].state == 1)
                continue;
            append_id(b, lv[k].id, first_missing);
            first_missing = false;
        }
        buf_append_str(b, "]}}");
        if (ok)
            *top = l->id;
    }
    return true;
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
    prog_view p = {prog, 0, NULL};
    for (size_t i = 0; i + 1 < prog->elements; i += 2) {
        const redisReply *k = prog->element[i], *v = prog->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == 2 && !memcmp(k->str, "xp", 2) &&
            v->type == REDIS_REPLY_STRING)
            p.xp = progress_parse_int(v->str, v->len);
    }
    if (p.xp < 0)
        p.xp = 0;
    slice t = {tpl->str, tpl->len}, top;
    skill_totals totals;
    if (progress_tpl_nested(t)) {
        if (!progress_totals_build(&req->pool, t, prog, &totals)) {
            request_fail_internal(req, "out of memory");
            return;
        }
        p.tree = &totals;
    }
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":{\"member\":\"");
    buf_append(b, m->addr, strlen(m->addr));
    buf_append_str(b, "\",\"xp\":");
    reads_append_int(b, p.xp);
    buf_append_str(b, ",\"rank\":");
    if (p.xp > 0 && rank->integer > 0)
        reads_append_int(b, rank->integer);
    else
        buf_append_str(b, "null");
    buf_append_str(b, ",\"skills\":[");
    render_skill_lines(b, t, &p);
    buf_append_str(b, "],\"levels\":[");
    if (!render_level_lines(req, b, t, &p, now, &top, &until)) {
        request_fail_internal(req, "out of memory");
        return;
    }
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
    /* The caller and platform go to the script too: it reads the member's progress only where
     * they may read it (CONTRACT §12). */
    const char *argv[] = {"EVALSHA",
                          store_script_sha(req->app->store, LUA_PROGRESS),
                          "9",
                          k.entity,
                          k.members,
                          prog,
                          board,
                          k.skill_order,
                          k.level_order,
                          gone,
                          k.owners,
                          k.admins,
                          m->addr,
                          req->caller,
                          reads_is_platform(req) ? "1" : "0"};
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
                     k.owners_len,
                     k.admins_len,
                     strlen(m->addr),
                     strlen(req->caller),
                     1};
    store_cmd cmds[1 + ENTITY_ROLE_CMDS + PROGRESS_READ_EXTRA_MAX] = {{15, argv, lens}};
    entity_role_lookup rl;
    entity_role_cmds(&rl, &k, req->caller, cmds + 1);
    for (int i = 0; i < nextra && i < PROGRESS_READ_EXTRA_MAX; i++)
        cmds[1 + ENTITY_ROLE_CMDS + i] = extra[i];
    reads_desc d = {1, {letter}};
    reads_desc_add(&d, m->id, strlen(m->id));
    reads_desc_add(&d, m->addr, lens[12]);
    reads_desc_add(&d, req->caller, strlen(req->caller));
    store_read_exec_as(req->app->store, request_read_flags(req), d.s, d.len, cb, req,
                       1 + ENTITY_ROLE_CMDS + nextra, cmds);
    return true;
}

const redisReply *progress_read_check(request *req, int status, redisReply *r, int nextra,
                                      const member_req *m)
{
    /* {{id, isEnabled, public, known, prog, rank, template}, roles, extra} */
    if (reads_reply(req, status, r, (size_t)(1 + ENTITY_ROLE_CMDS + nextra), 7,
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
    return len == CONTRIB_ENTRY_LEN && reads_all_digits(s, 16) && s[16] == ':' &&
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
    if (!path_member(req, m->id, m->addr) || !reads_limit(req, 100, 20, &m->limit) ||
        !query_cursor(req, CONTRIB_ENTRY_LEN, valid_contrib_entry, cursor))
        return;
    req->state = m;
    entity_keys k;
    keys_entity(&k, m->id);
    char contribs[KEYS_ENTITY_SIZE + 16], limit[24];
    snprintf(contribs, sizeof contribs, "%s:contribs", k.entity);
    snprintf(limit, sizeof limit, "%ld", m->limit);
    const char *argv[] = {
        k.entity,    k.owners, k.admins, k.members, contribs,
        req->caller, m->addr,  cursor,   limit,     reads_is_platform(req) ? "1" : "0"};
    run_script(req, LUA_CONTRIB_LIST, on_contributions, 5, argv, 10);
}
