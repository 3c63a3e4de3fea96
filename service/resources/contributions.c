/* contributions: award contributions to an entity's members, and revoke them
 * (CONTRACT §5). The checks against stored data (the member, the skills, the caller's role, the
 * idempotency key) run inside one script, so an award fully happens or not at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/arena.h"
#include "auth/auth.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/group.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"
#include "cache/readcache.h"

#define CONTRIB_MAX_BATCH  100
#define CONTRIB_MAX_SKILLS 32
#define CONTRIB_SCORE_MAX  1000000
#define CONTRIB_XP_MAX     1000000000LL
#define CONTRIB_TITLE_MAX  200
#define CONTRIB_REASON_MAX 500
/* The request digest: the first 20 bytes of Keccak-256 of the canonical request, in hex. */
#define CONTRIB_DIGEST_BYTES 20

static int fail(verr *e, const char *prefix, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s%s", prefix, field);
    snprintf(e->message, sizeof e->message, "%s%s %s", prefix, field, message);
    return -1;
}

/* `prefix` + `name` into f: what snprintf("%s%s") wrote, without its cost on every award. */
static const char *field_name(char f[96], const char *prefix, const char *name)
{
    size_t p = strnlen(prefix, 95), n = strnlen(name, 95 - p);
    memcpy(f, prefix, p);
    memcpy(f + p, name, n);
    f[p + n] = '\0';
    return f;
}

static void json_str(buf *b, const char *s, size_t n)
{
    buf_append(b, "\"", 1);
    buf_append_json_escaped(b, s, n);
    buf_append(b, "\"", 1);
}

/* What an award sends to contrib_award.lua besides its fixed arguments: the contributions as
 * the script reads them, each one's Contribution JSON and event data (rendered here, so that
 * Redis's one thread builds no JSON), and the progression keys the award changes. */
typedef struct award_args {
    const char *eid, *caller, *now_iso;
    const char *api_key_id; /* the entity API key that signed the request in, "" when none */
    buf items;              /* the contributions' fields as the script reads them, NUL-ended */
    size_t nitems;          /* fields in items */
    buf canon;              /* JSON array {member, skills, xp}: the digest's input */
    buf records, events;    /* the texts back to back, split by the offsets */
    size_t rec_at[CONTRIB_MAX_BATCH + 1], ev_at[CONTRIB_MAX_BATCH + 1];
    size_t n; /* contributions read */
    buf keys; /* the progression keys, NUL-ended, back to back: the read cache drops them */
} award_args;

static void award_args_free(award_args *a)
{
    buf_free(&a->items);
    buf_free(&a->canon);
    buf_free(&a->records);
    buf_free(&a->events);
    buf_free(&a->keys);
}

/* One field of a contribution, a script argument of its own: contrib_award.lua reads them by
 * position, with no JSON to decode (cjson was about a tenth of Redis's Lua time per award). */
static void item_str(award_args *a, const char *s, size_t len)
{
    buf_append(&a->items, s, len);
    buf_append(&a->items, "", 1);
    a->nitems++;
}

static void item_uint(award_args *a, unsigned long long v)
{
    buf_append_uint(&a->items, v);
    buf_append(&a->items, "", 1);
    a->nitems++;
}

static void award_key(award_args *a, const char *key, size_t len)
{
    buf_append(&a->keys, key, len + 1);
}

/* Validates one contribution `c` (fields named with `prefix`, "" or "contributions[i].") and
 * adds it to the award's arguments: to `items` as contrib_award.lua reads it, to `canon`
 * without its id (what the idempotency digest covers), its record, its event, its keys. */
static int read_one(json_t *c, const char *prefix, award_args *a, verr *e)
{
    buf *canon = &a->canon;
    if (!json_is_object(c)) {
        /* prefix is "contributions[i]." here: name the element itself */
        snprintf(e->field, sizeof e->field, "%.*s", (int)strlen(prefix) - 1, prefix);
        snprintf(e->message, sizeof e->message, "%s must be an object.", e->field);
        return -1;
    }
    json_t *mv = json_object_get(c, "member");
    char member[43];
    char f[96];
    field_name(f, prefix, "member");
    if (!mv)
        return fail(e, prefix, "member", "is required.");
    if (!json_is_string(mv))
        return fail(e, prefix, "member", "must be an address: 0x followed by 40 hex digits.");
    if (validate_address(json_string_value(mv), json_string_length(mv), f, member, e) != 0)
        return -1;

    json_t *sv = json_object_get(c, "skills");
    size_t nskills = 0;
    if (sv && !json_is_array(sv))
        return fail(e, prefix, "skills", "must be an array of {skillId, score}.");
    if (sv)
        nskills = json_array_size(sv);
    if (nskills > CONTRIB_MAX_SKILLS)
        return fail(e, prefix, "skills", "must hold at most 32 skills.");
    buf skills = BUF_INIT;
    int64_t sum = 0;
    int rc = 0;
    buf_append(&skills, "[", 1);
    for (size_t j = 0; j < nskills; j++) {
        json_t *s = json_array_get(sv, j);
        char sf[64];
        if (!json_is_object(s)) {
            snprintf(sf, sizeof sf, "skills[%zu]", j);
            rc = fail(e, prefix, sf, "must be an object {skillId, score}.");
            break;
        }
        json_t *id = json_object_get(s, "skillId"), *score = json_object_get(s, "score");
        if (!json_is_string(id) || !ids_valid(json_string_value(id), json_string_length(id), 's')) {
            snprintf(sf, sizeof sf, "skills[%zu].skillId", j);
            rc = fail(e, prefix, sf, "must be a skill id (s- followed by a lowercase UUIDv4).");
            break;
        }
        bool dup = false;
        for (size_t k = 0; k < j && !dup; k++) {
            json_t *other = json_object_get(json_array_get(sv, k), "skillId");
            dup = json_is_string(other) && !strcmp(json_string_value(other), json_string_value(id));
        }
        if (dup) {
            snprintf(sf, sizeof sf, "skills[%zu].skillId", j);
            rc = fail(e, prefix, sf, "names a skill already listed: skills must be distinct.");
            break;
        }
        if (!json_is_integer(score) || json_integer_value(score) < 1 ||
            json_integer_value(score) > CONTRIB_SCORE_MAX) {
            snprintf(sf, sizeof sf, "skills[%zu].score", j);
            rc = fail(e, prefix, sf, "must be an integer from 1 to 1000000.");
            break;
        }
        if (j)
            buf_append(&skills, ",", 1);
        /* the id is checked above: nothing in it to escape */
        buf_append_str(&skills, "{\"skillId\":\"");
        buf_append(&skills, json_string_value(id), json_string_length(id));
        buf_append_str(&skills, "\",\"score\":");
        buf_append_uint(&skills, (unsigned long long)json_integer_value(score));
        buf_append(&skills, "}", 1);
        sum += json_integer_value(score);
    }
    buf_append(&skills, "]", 1);
    if (rc) {
        buf_free(&skills);
        return -1;
    }

    json_t *xv = json_object_get(c, "xp");
    int64_t xp = sum;
    if (xv) {
        if (!json_is_integer(xv) || json_integer_value(xv) < 0 ||
            json_integer_value(xv) > CONTRIB_XP_MAX) {
            buf_free(&skills);
            return fail(e, prefix, "xp", "must be an integer from 0 to 1000000000.");
        }
        xp = json_integer_value(xv);
    }
    if (xp == 0 && nskills == 0) {
        buf_free(&skills);
        return fail(e, prefix, "xp",
                    "must be above 0 when skills is empty: a contribution must award something.");
    }

    const char *title, *url = NULL;
    size_t tlen, ulen = 0;
    field_name(f, prefix, "title");
    json_t *tv = json_object_get(c, "title");
    if (!tv) {
        buf_free(&skills);
        return fail(e, prefix, "title", "is required.");
    }
    if (validate_text_value(tv, f, TEXT_SOCIAL, &title, &tlen, e) != 0 ||
        validate_utf8_chars(title, tlen) < 1) {
        buf_free(&skills);
        return fail(e, prefix, "title",
                    "must be a string of 1 to 200 characters (after trimming).");
    }
    json_t *uv = json_object_get(c, "url");
    field_name(f, prefix, "url");
    if (uv && !json_is_null(uv) && validate_text_value(uv, f, TEXT_URL, &url, &ulen, e) != 0) {
        buf_free(&skills);
        return -1;
    }

    char id[IDS_SIZE];
    if (ids_new(id, 'k') != 0) {
        buf_free(&skills);
        return fail(e, prefix, "member", "could not be given an id (no randomness).");
    }
    if (a->n)
        buf_append(canon, ",", 1);
    /* Fields by position: id, member, xp (0: none), the skill count, then each skill's id and
     * score. Numbers stay strings in the script: Redis 7.0 turns a number a script passes to a
     * command into text with snprintf("%.17g"), a cost per argument the strings avoid. The
     * record and event below are rendered with appends: the texts are checked ids, addresses
     * and numbers, and the title and url, escaped. */
    item_str(a, id, strlen(id));
    item_str(a, member, strlen(member));
    item_uint(a, (unsigned long long)xp);
    item_uint(a, nskills);
    for (size_t j = 0; j < nskills; j++) {
        json_t *s = json_array_get(sv, j), *sid = json_object_get(s, "skillId");
        item_str(a, json_string_value(sid), json_string_length(sid));
        item_uint(a, (unsigned long long)json_integer_value(json_object_get(s, "score")));
    }
    /* The record as the API returns it; contrib_revoke.lua relies on its closing members. */
    buf *r = &a->records;
    buf_append_str(r, "{\"id\":\"");
    buf_append_str(r, id);
    buf_append_str(r, "\",\"entityID\":\"");
    buf_append_str(r, a->eid);
    buf_append_str(r, "\",");
    buf *out[2] = {canon, r};
    for (int k = 0; k < 2; k++) {
        buf *b = out[k];
        buf_append_str(b, k ? "\"member\":\"" : "{\"member\":\"");
        buf_append_str(b, member);
        buf_append_str(b, "\",\"skills\":");
        buf_append(b, skills.data, skills.len);
        buf_append_str(b, ",\"xp\":");
        buf_append_uint(b, (unsigned long long)xp);
        buf_append_str(b, ",\"title\":");
        json_str(b, title, tlen);
        buf_append_str(b, ",\"url\":");
        if (url)
            json_str(b, url, ulen);
        else
            buf_append_str(b, "null");
    }
    buf_append(canon, "}", 1);
    buf_append_str(r, ",\"createdAt\":\"");
    buf_append_str(r, a->now_iso);
    buf_append_str(r, "\",\"createdBy\":\"");
    buf_append_str(r, a->caller);
    if (a->api_key_id[0]) {
        /* Made with an entity API key: the creator is createdBy, the key names itself. */
        buf_append_str(r, "\",\"apiKeyId\":\"");
        buf_append_str(r, a->api_key_id);
    }
    buf_append_str(r,
                   "\",\"revoked\":false,\"revokedAt\":null,\"revokedBy\":null,\"reason\":null}");
    buf *ev = &a->events;
    buf_append_str(ev, "{\"id\":\"");
    buf_append_str(ev, id);
    buf_append_str(ev, "\",\"member\":\"");
    buf_append_str(ev, member);
    buf_append_str(ev, "\",\"xp\":");
    buf_append_uint(ev, (unsigned long long)xp);
    buf_append_str(ev, ",\"skills\":");
    buf_append(ev, skills.data, skills.len);
    if (a->api_key_id[0]) {
        buf_append_str(ev, ",\"apiKeyId\":\"");
        buf_append_str(ev, a->api_key_id);
        buf_append(ev, "\"", 1);
    }
    buf_append(ev, "}", 1);
    a->n++;
    a->rec_at[a->n] = r->len;
    a->ev_at[a->n] = a->events.len;
    /* The keys it changes: the member's prog hash (once), the XP board, each skill's board. */
    char key[KEYS_PROG_SIZE > KEYS_BOARD_SIZE ? KEYS_PROG_SIZE : KEYS_BOARD_SIZE];
    size_t klen = keys_prog(key, a->eid, member);
    bool seen = false;
    for (size_t at = 0; at < a->keys.len && !seen; at += strlen(a->keys.data + at) + 1)
        seen = !strcmp(a->keys.data + at, key);
    if (!seen)
        award_key(a, key, klen);
    for (size_t j = 0; j < nskills; j++) {
        klen = keys_board(key, a->eid,
                          json_string_value(json_object_get(json_array_get(sv, j), "skillId")));
        award_key(a, key, klen);
    }
    buf_free(&skills);
    return 0;
}

typedef struct award_state {
    bool batch;
    char eid[IDS_SIZE]; /* the entity, for the boards an answer names */
    /* The progression keys the award changes, NUL-ended, back to back (in the request's
     * arena): the script builds their names itself, so they are not its KEYS, and the read
     * cache drops them here when the answer comes. */
    char *keys;
    size_t keys_len;
    /* The answer's data, the records as a JSON array: the script answers a fresh award with
     * 'OK' alone, so Redis neither builds nor sends back what the service rendered. */
    char *answer;
    size_t answer_len;
} award_state;

/* 'INVALID <i> <field> <message>' (400) or 'OVER <i> <field> <message>' (409: an XP or a score
 * would pass 2^53 - 1) from contrib_award.lua: the field as the request named it, in a batch
 * "contributions[i].<field>" as the checks made here name it. */
static void fail_at(request *req, bool batch, const char *rest, int status, const char *code)
{
    char *end;
    unsigned long i = strtoul(rest, &end, 10);
    const char *sub = *end == ' ' ? end + 1 : "";
    const char *sp = strchr(sub, ' ');
    int sublen = sp ? (int)(sp - sub) : (int)strlen(sub);
    char field[96], message[300];
    if (batch)
        snprintf(field, sizeof field, "contributions[%lu].%.*s", i, sublen, sub);
    else
        snprintf(field, sizeof field, "%.*s", sublen, sub);
    snprintf(message, sizeof message, "%s %s", field, sp ? sp + 1 : "is invalid.");
    request_fail(req, status, code, message, field);
}

/* Drops from the read cache the boards named in a space-separated list of skill ids (an
 * answer's tail): boards the script moved beyond those the request named. */
static void award_drop_boards(request *req, const char *eid, const char *list, size_t len)
{
    readcache *rc = req->app->reads;
    if (!rc || !readcache_enabled(rc))
        return;
    size_t at = 0;
    while (at < len) {
        const char *sp = memchr(list + at, ' ', len - at);
        size_t n = sp ? (size_t)(sp - (list + at)) : len - at;
        char sid[IDS_SIZE], key[KEYS_BOARD_SIZE];
        if (n > 0 && n < sizeof sid && ids_valid(list + at, n, 's')) {
            memcpy(sid, list + at, n);
            sid[n] = '\0';
            readcache_invalidate(rc, key, keys_board(key, eid, sid));
        }
        at += n + 1;
    }
}

static void on_award(void *data, int status, redisReply *r)
{
    request *req = data;
    award_state *st = req->state;
    readcache *rc = req->app->reads;
    /* whatever the answer: a call that timed out may still have run */
    if (rc && readcache_enabled(rc))
        for (size_t at = 0; at < st->keys_len; at += strlen(st->keys + at) + 1)
            readcache_invalidate(rc, st->keys + at, strlen(st->keys + at));
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR &&
        !strncmp(r->str, "INVALID ", 8)) {
        fail_at(req, st->batch, r->str + 8, 400, "invalid_request");
        return;
    }
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "OVER ", 5)) {
        fail_at(req, st->batch, r->str + 5, 409, "conflict");
        return;
    }
    if (respond_store_failed(req, status, r))
        return;
    /* 'OK', 'OK <skill id> …' (the ancestors whose boards the award moved too: CONTRACT
     * section 15), or 'REPLAY <the first answer's JSON array>' */
    bool ok = r->type == REDIS_REPLY_STRING && r->len >= 2 && !memcmp(r->str, "OK", 2) &&
              (r->len == 2 || r->str[2] == ' ');
    if (ok && r->len > 2)
        award_drop_boards(req, st->eid, r->str + 3, r->len - 3);
    bool replay = r->type == REDIS_REPLY_STRING && r->len >= 9 && !memcmp(r->str, "REPLAY ", 7);
    if (!ok && !replay) {
        request_fail_internal(req, "contrib_award: unexpected reply");
        return;
    }
    const char *json = ok ? st->answer : r->str + 7;
    size_t len = ok ? st->answer_len : r->len - 7;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    if (st->batch)
        buf_append(b, json, len);
    else
        buf_append(b, json + 1, len - 2); /* the one element of the array */
    buf_append_str(b, replay ? ",\"replayed\":true}" : "}");
    respond_send(req, replay ? 200 : 201, b);
}

/* The time `now` of a write, for the script: milliseconds as text, and the events' arguments. */
static void stamp(const request *req, int64_t now, char now_ms[24], entity_event_args *ev)
{
    buf_format_int(now_ms, (long long)now);
    entity_event_args_fill(req, now, ev);
}

void contributions_post(request *req)
{
    char eid[IDS_SIZE];
    json_t *body;
    award_state *st = entity_write_open(req, eid, sizeof *st, &body);
    if (!st)
        return;
    verr e;
    int rc = 0;
    json_t *list = json_object_get(body, "contributions");
    st->batch = list != NULL;
    snprintf(st->eid, sizeof st->eid, "%s", eid);
    size_t n = 1;
    if (st->batch) {
        if (!json_is_array(list) || json_array_size(list) < 1 ||
            json_array_size(list) > CONTRIB_MAX_BATCH)
            rc = fail(&e, "", "contributions", "must be an array of 1 to 100 contributions.");
        else
            n = json_array_size(list);
    }
    const char *key = NULL; /* in key_buf: the body is released before the call */
    char key_buf[65];
    json_t *kv = json_object_get(body, "idempotencyKey");
    if (rc == 0 && kv) {
        if (!json_is_string(kv) || !ids_valid_level(json_string_value(kv), json_string_length(kv)))
            rc = fail(&e, "", "idempotencyKey",
                      "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -.");
        else
            key = memcpy(key_buf, json_string_value(kv), json_string_length(kv) + 1);
    }
    /* The turn's time, which every award of this turn shares: with the caller it travels once
     * in the group's shared part instead of once an award (each argument costs Redis a string
     * to parse and another for Lua). */
    char now_ms[24];
    entity_event_args ev;
    stamp(req, group_now_ms(req->app->groups), now_ms, &ev);
    award_args *aa = calloc(1, sizeof *aa);
    if (!aa) {
        json_decref(body);
        request_fail_internal(req, "out of memory");
        return;
    }
    aa->eid = eid;
    aa->caller = req->caller;
    aa->api_key_id = req->api_key_id;
    aa->now_iso = ev.at;
    buf_append_str(&aa->canon, st->batch ? "batch[" : "one[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char prefix[40] = "";
        json_t *c = body;
        if (st->batch) {
            snprintf(prefix, sizeof prefix, "contributions[%zu].", i);
            c = json_array_get(list, i);
            /* A batch is retried as a whole: its key is the body's, not an element's. */
            if (json_is_object(c) && json_object_get(c, "idempotencyKey")) {
                rc = fail(
                    &e, prefix, "idempotencyKey",
                    "is not taken in a batch: give idempotencyKey once, beside contributions.");
                break;
            }
        }
        rc = read_one(c, prefix, aa, &e);
    }
    buf_append_str(&aa->canon, "]");
    json_decref(body);
    if (rc != 0) {
        award_args_free(aa);
        free(aa);
        validate_fail(req, &e);
        return;
    }
    char digest[2 * CONTRIB_DIGEST_BYTES + 1] = "";
    if (key) {
        uint8_t h[KECCAK256_DIGEST_SIZE];
        keccak256(aa->canon.data, aa->canon.len, h);
        hex_encode(h, CONTRIB_DIGEST_BYTES, digest);
    }

    entity_keys k;
    keys_entity(&k, eid);
    char idem[KEYS_IDEM_SIZE], xp_board[KEYS_BOARD_SIZE];
    if (key)
        keys_idem(idem, eid, key);
    keys_board(xp_board, eid, "xp");
    char per_minute[24], count[24];
    snprintf(count, sizeof count, "%zu", aa->n);
    snprintf(per_minute, sizeof per_minute, "%lld",
             (long long)req->app->cfg.contributions_per_member_per_minute);
    /* What every award to this entity by this caller in this turn shares (the group's part,
     * group.h), then this award's. */
    const char *shared[] = {k.entity,
                            k.owners,
                            k.admins,
                            k.members,
                            k.skills,
                            k.contribs,
                            k.skill_order,
                            k.level_order,
                            xp_board,
                            ev.max,
                            per_minute,
                            req->caller,
                            auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                            now_ms,
                            ev.at};
    const char *args[] = {digest, count};
    size_t nshared = sizeof shared / sizeof shared[0], nargs = sizeof args / sizeof args[0];
    size_t nkeys = key ? 1 : 0, argc = nshared + nkeys + nargs + aa->nitems + 2 * aa->n;
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    st->keys = arena_alloc(&req->pool, aa->keys.len + 1);
    st->keys_len = aa->keys.len;
    st->answer_len = aa->rec_at[aa->n] + aa->n + 1; /* '[', the records, a ',' or ']' after each */
    st->answer = arena_alloc(&req->pool, st->answer_len + 1);
    if (!argv || !lens || !st->keys || !st->answer) {
        free(argv);
        free(lens);
        award_args_free(aa);
        free(aa);
        request_fail_internal(req, "out of memory");
        return;
    }
    size_t i = 0;
    for (size_t j = 0; j < nshared; j++, i++)
        argv[i] = shared[j], lens[i] = strlen(shared[j]);
    if (key)
        argv[i] = idem, lens[i] = strlen(idem), i++;
    if (aa->keys.len)
        memcpy(st->keys, aa->keys.data, aa->keys.len);
    char *ans = st->answer;
    *ans++ = '[';
    for (size_t j = 0; j < aa->n; j++) {
        memcpy(ans, aa->records.data + aa->rec_at[j], aa->rec_at[j + 1] - aa->rec_at[j]);
        ans += aa->rec_at[j + 1] - aa->rec_at[j];
        *ans++ = j + 1 < aa->n ? ',' : ']';
    }
    for (size_t j = 0; j < nargs; j++, i++)
        argv[i] = args[j], lens[i] = strlen(args[j]);
    for (size_t at = 0, j = 0; j < aa->nitems; at += lens[i] + 1, j++, i++)
        argv[i] = aa->items.data + at, lens[i] = strlen(argv[i]);
    for (size_t j = 0; j < aa->n; j++, i++)
        argv[i] = aa->records.data + aa->rec_at[j], lens[i] = aa->rec_at[j + 1] - aa->rec_at[j];
    for (size_t j = 0; j < aa->n; j++, i++)
        argv[i] = aa->events.data + aa->ev_at[j], lens[i] = aa->ev_at[j + 1] - aa->ev_at[j];
    /* Awards to one entity by one caller in one loop turn share one script call (group.h). */
    group_script(req->app->groups, LUA_CONTRIB_AWARD, on_award, req, 9, 6, (int)nkeys, (int)argc,
                 argv, lens);
    /* group_script copied the arguments */
    free(argv);
    free(lens);
    award_args_free(aa);
    free(aa);
}

/* ---- POST /api/entities/{id}/contributions/{cid}/revoke ---- */

/* A revocation changed the progression keys of the record's member and skills, which the
 * service knew only from the answer: the read cache drops them now, so that this instance's
 * next read is not older than the revocation (other instances hear it from Redis). */
static void revoke_invalidate(request *req, const char *eid, const char *record, size_t len)
{
    readcache *rc = req->app->reads;
    if (!rc || !readcache_enabled(rc))
        return;
    json_t *c = json_loadb(record, len, 0, NULL);
    const char *member = json_string_value(json_object_get(c, "member"));
    char key[KEYS_PROG_SIZE > KEYS_BOARD_SIZE ? KEYS_PROG_SIZE : KEYS_BOARD_SIZE];
    if (member) {
        readcache_invalidate(rc, key, keys_prog(key, eid, member));
        readcache_invalidate(rc, key, keys_board(key, eid, "xp"));
    }
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(c, "skills"), i, s)
    {
        const char *sid = json_string_value(json_object_get(s, "skillId"));
        if (sid && ids_valid(sid, strlen(sid), 's'))
            readcache_invalidate(rc, key, keys_board(key, eid, sid));
    }
    json_decref(c);
}

static void on_revoke(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_STRING,
                             "contrib_revoke: unexpected reply"))
        return;
    /* the record, then in a skill tree a newline and the skills above the revoked ones */
    const char *nl = memchr(r->str, '\n', r->len);
    size_t len = nl ? (size_t)(nl - r->str) : r->len;
    revoke_invalidate(req, req->state, r->str, len);
    if (nl)
        award_drop_boards(req, req->state, nl + 1, r->len - len - 1);
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    buf_append(b, r->str, len);
    buf_append(b, "}", 1);
    respond_send(req, 200, b);
}

void contribution_revoke(request *req)
{
    char eid[IDS_SIZE];
    if (!entity_path_id(req, eid))
        return;
    slice c = request_path_param(req, 1);
    if (!ids_valid(c.s, c.len, 'k')) {
        request_fail(req, 404, "not_found", "No such contribution.", NULL);
        return;
    }
    char cid[IDS_SIZE];
    memcpy(cid, c.s, c.len);
    cid[c.len] = '\0';
    char *held = request_state(req, IDS_SIZE);
    if (!held)
        return;
    memcpy(held, eid, IDS_SIZE);
    json_t *body = validate_body(req);
    if (!body)
        return;
    verr e;
    const char *reason;
    size_t rlen;
    int got = validate_text(body, "reason", true, TEXT_DESCRIPTION, &reason, &rlen, &e);
    if (got == 1) {
        while (rlen && (*reason == ' ' || *reason == '\t' || *reason == '\n' || *reason == '\r')) {
            reason++;
            rlen--;
        }
        while (rlen && (reason[rlen - 1] == ' ' || reason[rlen - 1] == '\t' ||
                        reason[rlen - 1] == '\n' || reason[rlen - 1] == '\r'))
            rlen--;
        size_t chars = validate_utf8_chars(reason, rlen);
        if (chars < 1 || chars > CONTRIB_REASON_MAX)
            got = fail(&e, "", "reason", "must be 1 to 500 characters (after trimming).");
    }
    if (got != 1) {
        json_decref(body);
        validate_fail(req, &e);
        return;
    }
    entity_keys k;
    keys_entity(&k, eid);
    char now_ms[24];
    entity_event_args ev;
    stamp(req, isotime_now_ms(), now_ms, &ev);
    const char *argv[] = {
        k.entity,   k.owners,    k.admins,
        k.contribs, req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        cid,        reason,      now_ms,
        ev.at,      ev.max};
    size_t argc = sizeof argv / sizeof argv[0], lens[sizeof argv / sizeof argv[0]];
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    lens[7] = rlen;
    store_script(req->app->store, LUA_CONTRIB_REVOKE, on_revoke, req, 4, (int)argc, argv, lens);
    json_decref(body); /* reason views the body; store_script copied it */
}
