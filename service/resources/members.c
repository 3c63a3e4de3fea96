/* members: an entity's members: their pages (GET …/users, rendered here from the compact entries
 * and kept in cache/pagecache.h), adding them (force-add), and their leaving: removed by the
 * entity's owners and admins (one, or many), or by their own choice. */
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
#include "core/log.h"
#include "cache/pagecache.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"
#include "jobs/sweeper.h"

static bool is_platform(request *req)
{
    return auth_is_platform_admin(req->app->auth, req->caller);
}

/* ---- GET /api/entities/{id}/users ---- */

/* A member entry (keys.h): "<addedAt ms, 16 digits>:<address>:<addedBy>:<chain>[:rules]". Its first
 * ORDER_ENTRY_LEN bytes are the page cursor. */
#define ORDER_ENTRY_LEN 59 /* 16 digits + ':' + 42-character address */
#define ENTRY_BY_AT     (ORDER_ENTRY_LEN + 1)
#define ENTRY_CHAIN_AT  (ENTRY_BY_AT + 42 + 1)
#define CHAIN_MAX       32
#define RULES_LEN       6 /* ":rules" */

static bool valid_order_entry(const char *s, size_t len)
{
    if (len != ORDER_ENTRY_LEN || s[16] != ':' || s[17] != '0' || s[18] != 'x')
        return false;
    for (size_t i = 0; i < 16; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    for (size_t i = 19; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool valid_chain(const char *s, size_t n)
{
    if (n < 1 || n > CHAIN_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* The ISO form of the last addedAt rendered: a page's members mostly share one per batch. */
typedef struct member_time {
    char ms[16];
    char iso[ISOTIME_STRING_SIZE];
} member_time;

/* Appends the member JSON of one order entry; false when the entry is not one. The addresses
 * are trusted as force_add.lua wrote them (validated on the way in); the structure and the one
 * free-form part, the chain, are checked, so no entry can break the page's JSON. Entries of the
 * first storage format ("<addedAt>:<address>:<member JSON>") are copied as they are. */
static bool render_member(buf *b, const char *e, size_t len, member_time *t)
{
    if (len <= ENTRY_BY_AT || e[16] != ':' || e[ORDER_ENTRY_LEN] != ':')
        return false;
    if (e[ENTRY_BY_AT] == '{') {
        if (e[len - 1] != '}')
            return false;
        buf_append(b, e + ENTRY_BY_AT, len - ENTRY_BY_AT - 1);
        buf_append_str(b, ",\"via\":\"manual\"}");
        return true;
    }
    if (len < ENTRY_CHAIN_AT || e[ENTRY_CHAIN_AT - 1] != ':')
        return false;
    /* a join's entry ends ":rules", its chain "" (keys.h) */
    size_t clen = len - ENTRY_CHAIN_AT;
    bool rules = clen >= RULES_LEN && memcmp(e + len - RULES_LEN, ":rules", RULES_LEN) == 0;
    if (rules)
        clen -= RULES_LEN;
    if (!(rules && clen == 0) && !valid_chain(e + ENTRY_CHAIN_AT, clen))
        return false;
    if (memcmp(t->ms, e, 16) != 0) {
        int64_t ms = 0;
        for (size_t i = 0; i < 16; i++) {
            if (e[i] < '0' || e[i] > '9')
                return false;
            ms = ms * 10 + (e[i] - '0');
        }
        memcpy(t->ms, e, 16);
        isotime_format(ms, t->iso);
    }
    buf_append_str(b, "{\"address\":\"");
    buf_append(b, e + 17, 42);
    buf_append_str(b, "\",\"chain\":\"");
    buf_append(b, e + ENTRY_CHAIN_AT, clen);
    buf_append_str(b, "\",\"addedAt\":\"");
    buf_append_str(b, t->iso);
    buf_append_str(b, "\",\"addedBy\":\"");
    buf_append(b, e + ENTRY_BY_AT, 42);
    buf_append_str(b, rules ? "\",\"via\":\"rules\"}" : "\",\"via\":\"manual\"}");
    return true;
}

/* A users page request. Pages are cached (pagecache.h) under the member list's version,
 * "<membersVersion>:<ZCARD of the order>": force_add.lua and members_remove.lua set a fresh
 * membersVersion with every change, and the count also moves with any add made without one (by
 * an older release during an upgrade, which could only add). */
typedef struct users_req {
    char id[IDS_SIZE];
    long limit;
    bool full;  /* the page itself was asked for, not only the version */
    bool roles; /* the caller's role lookups were asked for (entity.h) */
    char start[ORDER_ENTRY_LEN + 3], count[8];
    char key[IDS_SIZE + ORDER_ENTRY_LEN + 16]; /* id|cursor|limit */
    size_t klen;
} users_req;

static void send_users_read(request *req);

/* The page's version from the EXEC reply's HMGET (4th field) and ZCARD; false when the entity
 * has no membersVersion yet (its pages are not cached). */
static bool page_version(const redisReply *fields, const redisReply *zcard, char *out, size_t size,
                         size_t *len)
{
    const redisReply *v = fields->elements >= 4 ? fields->element[3] : NULL;
    if (!v || v->type != REDIS_REPLY_STRING || v->len == 0 || v->len > 32 ||
        zcard->type != REDIS_REPLY_INTEGER)
        return false;
    int n = snprintf(out, size, "%.*s:%lld", (int)v->len, v->str, (long long)zcard->integer);
    if (n < 0 || (size_t)n >= size)
        return false;
    *len = (size_t)n;
    return true;
}

static void render_page(buf *b, const redisReply *page, long limit)
{
    size_t n = page->elements < (size_t)limit ? page->elements : (size_t)limit;
    buf_append_str(b, "{\"success\":true,\"users\":[");
    member_time t = {.ms = {0}};
    size_t skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = page->element[i];
        size_t mark = b->len;
        if (b->data[b->len - 1] != '[')
            buf_append(b, ",", 1);
        if (e->type != REDIS_REPLY_STRING || !render_member(b, e->str, e->len, &t)) {
            b->len = mark;
            skipped++;
        }
    }
    buf *line = skipped ? log_begin(LOG_WARN, "members page: malformed entries skipped") : NULL;
    if (line) {
        log_int(line, "skipped", (int64_t)skipped);
        log_end(line);
    }
    buf_append_str(b, "],\"nextCursor\":");
    if (page->elements > (size_t)limit && n > 0 && page->element[n - 1]->len > ORDER_ENTRY_LEN) {
        char cursor[2 * ORDER_ENTRY_LEN + 1];
        hex_encode((const uint8_t *)page->element[n - 1]->str, ORDER_ENTRY_LEN, cursor);
        buf_append(b, "\"", 1);
        buf_append(b, cursor, 2 * ORDER_ENTRY_LEN);
        buf_append(b, "\"}", 2);
    } else {
        buf_append_str(b, "null}");
    }
}

static void on_members_page(void *data, int status, redisReply *r)
{
    request *req = data;
    users_req *u = req->state;
    /* EXEC: {HMGET id isEnabled public membersVersion, [the role lookups,] ZCARD}, or, for the
     * page itself, the gate's answer {the HMGET, the role lookups, the ZRANGEBYLEX page, ZCARD} */
    int nroles = u->roles ? ENTITY_ROLE_CMDS : 0;
    size_t nreplies = (u->full ? 3 : 2) + (size_t)nroles;
    const redisReply *fields;
    if (u->full) {
        /* the page is read gated, the role lookups with it (send_users_read) */
        r = (redisReply *)entity_gate_reply(req, status, r);
        if (!r)
            return;
        status = STORE_OK;
    }
    entity_read e = entity_read_exec(req, status, r, nreplies, nroles, false, &fields);
    if (e == ENTITY_READ_ASK_ROLES) {
        u->roles = true;
        send_users_read(req);
        return;
    }
    if (e != ENTITY_READ_OK)
        return;
    char version[64];
    size_t vlen = 0;
    bool versioned = page_version(fields, r->element[nreplies - 1], version, sizeof version, &vlen);
    pagecache *pc = req->app->pages;
    if (!u->full) {
        size_t blen;
        const char *body =
            versioned ? pagecache_get(pc, u->key, u->klen, version, vlen, &blen) : NULL;
        if (body) {
            /* Queued on the connection (copied) before anything can replace the entry. */
            slice part = {body, blen};
            request_reply_parts(req, 200, &part, 1);
        } else {
            u->full = true; /* changed since it was cached: read the page itself */
            send_users_read(req);
        }
        return;
    }
    const redisReply *page = r->element[1 + nroles];
    if (page->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "members page: unexpected reply");
        return;
    }
    buf *b = respond_scratch();
    render_page(b, page, u->limit);
    if (versioned)
        pagecache_put(pc, u->key, u->klen, version, vlen, b->data, b->len);
    respond_send(req, 200, b);
}

static void send_users_read(request *req)
{
    users_req *u = req->state;
    entity_keys k;
    keys_entity(&k, u->id);
    const char *access[] = {"HMGET", k.entity, "id", "isEnabled", "public", "membersVersion"};
    size_t alens[] = {5, k.entity_len, 2, 9, 6, 14};
    const char *range[] = {"ZRANGEBYLEX", k.order, u->start, "+", "LIMIT", "0", u->count};
    size_t rlens[] = {11, k.order_len, strlen(u->start), 1, 5, 1, strlen(u->count)};
    const char *zcard[] = {"ZCARD", k.order};
    size_t zlens[] = {5, k.order_len};
    if (u->full) {
        /* Gated (entity.h): a caller who may not read the page costs Redis the role lookups,
         * not the page; so the roles are asked for at once. */
        u->roles = true;
        store_cmd page[] = {{7, range, rlens}, {2, zcard, zlens}}, cmd;
        entity_gate g;
        entity_gate_init(&g, req, &k, 'r', 4, access + 2, alens + 2);
        entity_gate_add(&g, &page[0]);
        entity_gate_add(&g, &page[1]);
        if (entity_gate_cmd(&g, req, &cmd))
            store_read_exec(req->app->store, request_read_flags(req), on_members_page, req, 1,
                            &cmd);
        return;
    }
    store_cmd cmds[2 + ENTITY_ROLE_CMDS] = {{6, access, alens}};
    entity_role_lookup rl;
    int n = 1;
    if (u->roles) {
        entity_role_cmds(&rl, &k, req->caller, cmds + 1);
        n += ENTITY_ROLE_CMDS;
    }
    cmds[n++] = (store_cmd){2, zcard, zlens};
    /* After a stale cached page or a role that decides, this is a second read; the revocation
     * check went with the first. */
    store_read_exec(req->app->store, request_read_flags(req), on_members_page, req, n, cmds);
}

void entity_users_get(request *req)
{
    users_req *u = arena_alloc(&req->pool, sizeof *u);
    if (!u) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, u->id))
        return;
    size_t len;
    long limit = 100;
    const char *lp = request_param(req, "limit", &len);
    if (lp) {
        limit = 0;
        for (size_t i = 0; i < len && limit <= 1000; i++)
            limit = lp[i] >= '0' && lp[i] <= '9' ? limit * 10 + (lp[i] - '0') : 100000;
        if (!len || limit < 1 || limit > 1000) {
            request_fail_field(req, "limit", "limit must be an integer from 1 to 1000.");
            return;
        }
    }
    char cursor[ORDER_ENTRY_LEN + 1] = "";
    const char *cp = request_param(req, "cursor", &len);
    if (cp && len) {
        if (len != 2 * ORDER_ENTRY_LEN ||
            hex_decode(cp, len, (uint8_t *)cursor, ORDER_ENTRY_LEN) != 0 ||
            !valid_order_entry(cursor, ORDER_ENTRY_LEN)) {
            request_fail_field(req, "cursor", "cursor must be a nextCursor value from a page.");
            return;
        }
        cursor[ORDER_ENTRY_LEN] = '\0';
    }
    u->limit = limit;
    /* One page past the cursor: "[<cursor>;" sorts after every entry of that member. */
    if (cursor[0])
        snprintf(u->start, sizeof u->start, "[%s;", cursor);
    else
        memcpy(u->start, "-", 2);
    snprintf(u->count, sizeof u->count, "%ld", limit + 1);
    int kl = snprintf(u->key, sizeof u->key, "%s|%s|%ld", u->id, cursor, limit);
    u->klen = kl > 0 && (size_t)kl < sizeof u->key ? (size_t)kl : 0;
    req->state = u;
    /* With a page cached under this key, ask only for the version; otherwise for the page. */
    u->full = !pagecache_lookup(req->app->pages, u->key, u->klen);
    u->roles = false;
    send_users_read(req);
}

/* ---- POST /api/entities/{id}/force-add ---- */

/* The force-add's parsed request, kept across its index step. */
typedef struct force_add_state {
    entity_addresses a;
    char chain[33];
    findindex_added added; /* what the index add wrote: a refused write takes it back */
    size_t ngaining;       /* the addresses the check found no member, indexed ahead */
    char (*held)[43];      /* the others, members at the check */
    size_t nheld;
    long long added_n, existing_n;
} force_add_state;

static void force_add_answer(request *req, int status)
{
    (void)status; /* the write happened: an index add-after that failed does not undo it */
    const force_add_state *fs = req->state;
    json_t *out = respond_ok();
    json_object_set_new(out, "added", json_integer(fs->added_n));
    json_object_set_new(out, "existing", json_integer(fs->existing_n));
    request_reply(req, 200, out);
}

static void on_force_add(void *data, int status, redisReply *r)
{
    request *req = data;
    force_add_state *st = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR) {
        findindex_refuse(req, &st->added, r);
        return;
    }
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "force_add: unexpected reply");
        return;
    }
    /* {added, existing, board...}: the boards re-added members went back on */
    force_add_state *fs = req->state;
    entity_drop_boards(req, fs->a.id, r, 2);
    fs->added_n = r->element[0]->integer;
    fs->existing_n = r->element[1]->integer;
    /* More added than the check found missing: members it saw were removed before the script
     * ran (their entries perhaps dropped since), and are members again. Their entries are
     * added now, before the answer (an add-after, in this race only). */
    if (fs->added_n > (long long)fs->ngaining && fs->nheld) {
        findindex_add(req, fs->a.id, (const char(*)[43])fs->held, fs->nheld, INDEXES_MEMBER, 0,
                      NULL, 0, NULL, force_add_answer);
        return;
    }
    force_add_answer(req, STORE_OK);
}

static void force_add_write(request *req, int status)
{
    force_add_state *fs = req->state;
    if (status != STORE_OK) {
        respond_store_failed(req, status, NULL);
        return;
    }
    entity_keys k;
    keys_entity(&k, fs->a.id);
    char added_at[24], version[17];
    int64_t now = isotime_now_ms();
    snprintf(added_at, sizeof added_at, "%016lld", (long long)now);
    entity_event_args ev;
    entity_event_args_fill(req, now, &ev);
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness for the members version");
        return;
    }
    hex_encode(rnd, sizeof rnd, version);
    char limit[24];
    snprintf(limit, sizeof limit, "%lld", (long long)req->app->cfg.max_members_per_entity);
    const char *head[] = {k.entity,
                          k.owners,
                          k.admins,
                          k.members,
                          k.order,
                          req->caller,
                          is_platform(req) ? "1" : "0",
                          fs->chain,
                          added_at,
                          version,
                          ev.max,
                          ev.at,
                          limit};
    entity_script(req, LUA_FORCE_ADD, on_force_add, 5, head, sizeof head / sizeof head[0],
                  fs->a.list, fs->a.n);
}

/* Add-before (findindex.h): every address listed that is no member yet may become one. */
static void on_force_add_check(request *req, const redisReply *r)
{
    force_add_state *fs = req->state;
    char(*gaining)[43];
    size_t n = entity_check_split(req, r, (const char(*)[43])fs->a.list, fs->a.n, false, &gaining);
    fs->ngaining = n;
    fs->nheld = entity_check_split(req, r, (const char(*)[43])fs->a.list, fs->a.n, true, &fs->held);
    if (!gaining || !fs->held) {
        request_fail_internal(req, "out of memory");
        return;
    }
    findindex_add(req, fs->a.id, (const char(*)[43])gaining, n, INDEXES_MEMBER, 0, NULL, 0,
                  &fs->added, force_add_write);
}

void entity_force_add(request *req)
{
    force_add_state *fs = request_state(req, sizeof *fs);
    if (!fs)
        return;
    json_t *body = entity_addresses_body(req, 1000, &fs->a);
    if (!body)
        return;
    const char *chain_key = json_object_get(body, "Chain") ? "Chain" : "chain";
    json_t *chain = json_object_get(body, chain_key);
    if (!json_is_string(chain) ||
        !valid_chain(json_string_value(chain), json_string_length(chain))) {
        json_decref(body);
        request_fail_field(req, "Chain",
                           "Chain must be 1 to 32 characters of A-Z, a-z, 0-9, _ and -.");
        return;
    }
    snprintf(fs->chain, sizeof fs->chain, "%s", json_string_value(chain));
    json_decref(body);
    /* Asked first (CONTRACT §12): a caller the script would refuse writes nothing ahead. */
    entity_check(req, fs->a.id, "staff", INDEXES_MEMBER, (const char(*)[43])fs->a.list, fs->a.n,
                 on_force_add_check);
}

/* ---- DELETE …/members/{address}, POST …/members/remove, POST …/leave ---- */

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
