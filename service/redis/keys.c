/* keys: every Redis key shape entityd uses (documented in keys.h). */
#include "redis/keys.h"

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

size_t keys_revoked(char out[KEYS_REVOKED_SIZE], const char *revocation_id)
{
    return put(out, KEYS_REVOKED_SIZE, "auth:revoked:", revocation_id, "");
}

void keys_entity(entity_keys *k, const char *id)
{
    k->entity_len = put(k->entity, sizeof k->entity, "ent:{", id, "}");
    k->owners_len = put(k->owners, sizeof k->owners, "ent:{", id, "}:owners");
    k->admins_len = put(k->admins, sizeof k->admins, "ent:{", id, "}:admins");
    k->members_len = put(k->members, sizeof k->members, "ent:{", id, "}:members");
    k->order_len = put(k->order, sizeof k->order, "ent:{", id, "}:members:order");
    k->skills_len = put(k->skills, sizeof k->skills, "ent:{", id, "}:skills");
    k->skill_order_len = put(k->skill_order, sizeof k->skill_order, "ent:{", id, "}:skills:order");
    k->skill_names_len = put(k->skill_names, sizeof k->skill_names, "ent:{", id, "}:skills:names");
    k->levels_len = put(k->levels, sizeof k->levels, "ent:{", id, "}:levels");
    k->level_order_len = put(k->level_order, sizeof k->level_order, "ent:{", id, "}:levels:order");
    k->contribs_len = put(k->contribs, sizeof k->contribs, "ent:{", id, "}:contribs");
    k->events_len = put(k->events, sizeof k->events, "ent:{", id, "}:events");
}

size_t keys_idem(char out[KEYS_IDEM_SIZE], const char *entity_id, const char *key)
{
    char prefix[KEYS_ENTITY_SIZE];
    if (!put(prefix, sizeof prefix, "ent:{", entity_id, "}:idem:"))
        return 0;
    return put(out, KEYS_IDEM_SIZE, prefix, key, "");
}

size_t keys_alias(char out[KEYS_ALIAS_SIZE], const char *alias)
{
    return put(out, KEYS_ALIAS_SIZE, "alias:{", alias, "}");
}
