/* keys: every Redis key shape entityd uses (documented in keys.h). */
#include "redis/keys.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Writes prefix + a + suffix; returns the length, or 0 when it does not fit. */
static size_t put(char *out, size_t cap, const char *prefix, const char *a, const char *suffix)
{
    size_t p = strlen(prefix), n = strlen(a), s = strlen(suffix);
    if (p + n + s + 1 > cap) {
        out[0] = '\0';
        return 0;
    }
    memcpy(out, prefix, p);
    memcpy(out + p, a, n);
    memcpy(out + p + n, suffix, s + 1);
    return p + n + s;
}

/* The keys of one shape each: prefix + the caller's string + suffix (keys.h says which). */
#define KEYS_PUT(name, cap, arg, prefix, suffix)                                                   \
    size_t keys_##name(char out[cap], const char *arg)                                             \
    {                                                                                              \
        return put(out, cap, prefix, arg, suffix);                                                 \
    }
KEYS_PUT(revoked, KEYS_REVOKED_SIZE, revocation_id, "auth:revoked:", "")
KEYS_PUT(limit, KEYS_LIMIT_SIZE, address, "limit:{", "}")
KEYS_PUT(sessions, KEYS_SESSIONS_SIZE, address, "auth:sess:{", "}")
KEYS_PUT(unswept, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:lb:unswept")
KEYS_PUT(board_rebuild, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:lb:rebuild:boards")
KEYS_PUT(alias, KEYS_ALIAS_SIZE, alias, "alias:{", "}")
KEYS_PUT(erasure, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:erasure")
KEYS_PUT(apikeys, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:apikeys")
KEYS_PUT(webhooks, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:webhooks")
KEYS_PUT(events, KEYS_ENTITY_SIZE, entity_id, "ent:{", "}:events")

size_t keys_join(char out[KEYS_ENTITY_SIZE], const char *entity_id, const char *suffix)
{
    char tail[32];
    snprintf(tail, sizeof tail, "}:join%s", suffix);
    return put(out, KEYS_ENTITY_SIZE, "ent:{", entity_id, tail);
}

size_t keys_webhook(char out[KEYS_WEBHOOK_SIZE], const char *entity_id, const char *wid,
                    const char *suffix)
{
    int n = snprintf(out, KEYS_WEBHOOK_SIZE, "ent:{%s}:wh:%s%s", entity_id, wid, suffix);
    if (n < 0 || (size_t)n >= KEYS_WEBHOOK_SIZE) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

size_t keys_webhook_platform(char out[KEYS_WEBHOOK_SIZE], const char *wid, const char *suffix)
{
    int n = snprintf(out, KEYS_WEBHOOK_SIZE, "whp:{%s}%s", wid, suffix);
    if (n < 0 || (size_t)n >= KEYS_WEBHOOK_SIZE) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

size_t keys_challenge(char out[KEYS_CHALLENGE_SIZE], const char *address, const char *nonce)
{
    int n = snprintf(out, KEYS_CHALLENGE_SIZE, "auth:chal:{%s}:%s", address, nonce);
    return n < 0 || (size_t)n >= KEYS_CHALLENGE_SIZE ? 0 : (size_t)n;
}

/* The entity's keys: where each is written in entity_keys, and its suffix after the tag. */
#define KEY(f, suffix)                                                                             \
    {                                                                                              \
        offsetof(entity_keys, f), offsetof(entity_keys, f##_len), suffix, sizeof suffix - 1        \
    }
static const struct {
    size_t at, len_at;
    const char *suffix;
    size_t suffix_len;
} entity_key_shapes[] = {
    KEY(entity, "}"),
    KEY(owners, "}:owners"),
    KEY(admins, "}:admins"),
    KEY(members, "}:members"),
    KEY(order, "}:members:order"),
    KEY(skills, "}:skills"),
    KEY(skill_order, "}:skills:order"),
    KEY(skill_names, "}:skills:names"),
    KEY(levels, "}:levels"),
    KEY(level_order, "}:levels:order"),
    KEY(contribs, "}:contribs"),
    KEY(events, "}:events"),
};
#undef KEY

void keys_entity(entity_keys *k, const char *id)
{
    /* Every read builds these: the id is measured once, and the tag's prefix copied whole. */
    static const char prefix[] = "ent:{";
    size_t n = strlen(id), p = sizeof prefix - 1;
    for (size_t i = 0; i < sizeof entity_key_shapes / sizeof entity_key_shapes[0]; i++) {
        char *out = (char *)k + entity_key_shapes[i].at;
        size_t s = entity_key_shapes[i].suffix_len, len = p + n + s;
        if (len + 1 > KEYS_ENTITY_SIZE) {
            out[0] = '\0';
            len = 0;
        } else {
            memcpy(out, prefix, p);
            memcpy(out + p, id, n);
            memcpy(out + p + n, entity_key_shapes[i].suffix, s + 1);
        }
        *(size_t *)((char *)k + entity_key_shapes[i].len_at) = len;
    }
}

void keys_entity_roles(entity_role_keys *k, const char *id)
{
    /* the same shapes as the first four of entity_key_shapes */
    static const char *const suffixes[4] = {"}", "}:owners", "}:admins", "}:members"};
    char *outs[4] = {k->entity, k->owners, k->admins, k->members};
    size_t *lens[4] = {&k->entity_len, &k->owners_len, &k->admins_len, &k->members_len};
    size_t n = strlen(id);
    for (int i = 0; i < 4; i++) {
        size_t s = strlen(suffixes[i]), len = 5 + n + s;
        if (len + 1 > KEYS_ENTITY_SIZE) {
            outs[i][0] = '\0';
            len = 0;
        } else {
            memcpy(outs[i], "ent:{", 5);
            memcpy(outs[i] + 5, id, n);
            memcpy(outs[i] + 5 + n, suffixes[i], s + 1);
        }
        *lens[i] = len;
    }
}

size_t keys_idem(char out[KEYS_IDEM_SIZE], const char *entity_id, const char *key)
{
    char prefix[KEYS_ENTITY_SIZE];
    if (!put(prefix, sizeof prefix, "ent:{", entity_id, "}:idem:"))
        return 0;
    return put(out, KEYS_IDEM_SIZE, prefix, key, "");
}

size_t keys_prog(char out[KEYS_PROG_SIZE], const char *entity_id, const char *address)
{
    char prefix[KEYS_ENTITY_SIZE];
    if (!put(prefix, sizeof prefix, "ent:{", entity_id, "}:prog:"))
        return 0;
    return put(out, KEYS_PROG_SIZE, prefix, address, "");
}

/* A leaderboard key and its ":gone" companion: one shape, two suffixes. */
static size_t board(char out[KEYS_BOARD_SIZE], const char *entity_id, const char *by,
                    const char *suffix)
{
    char prefix[KEYS_ENTITY_SIZE];
    bool xp = !strcmp(by, "xp");
    if (!put(prefix, sizeof prefix, "ent:{", entity_id, xp ? "}:lb:" : "}:lb:s:"))
        return 0;
    return put(out, KEYS_BOARD_SIZE, prefix, by, suffix);
}

size_t keys_board(char out[KEYS_BOARD_SIZE], const char *entity_id, const char *by)
{
    return board(out, entity_id, by, "");
}

size_t keys_board_gone(char out[KEYS_BOARD_SIZE], const char *entity_id, const char *by)
{
    return board(out, entity_id, by, ":gone");
}

void keys_wallet(wallet_keys *k, const char *address)
{
    static const char *const suffix[KEYS_WALLET_N] = {"}:meta", "}:any", "}:owner", "}:admin",
                                                      "}:member"};
    for (size_t i = 0; i < KEYS_WALLET_N; i++)
        k->len[i] = put(k->key[i], KEYS_WALLET_SIZE, "wallet:{", address, suffix[i]);
}
