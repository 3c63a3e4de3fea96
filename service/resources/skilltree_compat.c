/* skilltree_compat: an earlier release's skill tree as this release shows it
 * (skilltree_compat.h). */
#include <stddef.h>
#include <string.h>

#include "resources/skilltree_compat.h"

/* The first ',"createdBy":"' in [at, end), or NULL. A quote inside a JSON string is escaped,
 * so these bytes are only ever the field itself. */
static const char created_by[] = ",\"createdBy\":\"";

/* The first `n` bytes of `what` in [at, end), or NULL. */
static const char *find_bytes(const char *at, const char *end, const char *what, size_t n)
{
    while (end - at >= (ptrdiff_t)n) {
        at = memchr(at, what[0], (size_t)(end - at - (ptrdiff_t)n + 1));
        if (!at)
            return NULL;
        if (!memcmp(at, what, n))
            return at;
        at++;
    }
    return NULL;
}

static const char *find_created_by(const char *at, const char *end)
{
    return find_bytes(at, end, created_by, sizeof created_by - 1);
}

/* Where a Skill JSON of an earlier release ends: the '}' right after the createdBy value the
 * match c begins, or NULL when parentId and depth follow it (this release's form). */
static const char *old_skill_end(const char *c, const char *end)
{
    const char *v = c + sizeof created_by - 1;
    const char *q = memchr(v, '"', (size_t)(end - v));
    return q && q + 1 < end && q[1] == '}' ? q + 1 : NULL;
}

/* A tree rendered by an earlier release has Skill JSONs without parentId and depth; each such
 * skill is a root (CONTRACT section 15) and reads as one until the entity's next skill or
 * level write renders the tree again. Judged on the first skill alone, so the tree of this
 * release costs a read one skill's scan; an old one is copied once, into the request's pool,
 * with the two fields added to every skill that lacks them. */
static slice skills_with_parents(arena *pool, slice tree)
{
    static const char root_tail[] = ",\"parentId\":null,\"depth\":0";
    const char *end = tree.s + tree.len;
    const char *c = find_created_by(tree.s, end);
    if (!c || !old_skill_end(c, end))
        return tree;
    size_t n = 0;
    for (const char *at = c; at; at = find_created_by(at + 1, end))
        n += old_skill_end(at, end) != NULL;
    char *out = arena_alloc(pool, tree.len + n * (sizeof root_tail - 1));
    if (!out)
        return tree;
    size_t len = 0;
    const char *from = tree.s;
    for (const char *at = c; at; at = find_created_by(at + 1, end)) {
        const char *close = old_skill_end(at, end);
        if (!close)
            continue;
        memcpy(out + len, from, (size_t)(close - from));
        len += (size_t)(close - from);
        memcpy(out + len, root_tail, sizeof root_tail - 1);
        len += sizeof root_tail - 1;
        from = close;
    }
    memcpy(out + len, from, (size_t)(end - from));
    len += (size_t)(end - from);
    return (slice){out, len};
}

/* A Level JSON of an earlier release has no requires; the field goes right before endsAt, as
 * this release writes it. Quoted keys never occur inside a JSON string (its quotes are
 * escaped), and no skill has an endsAt, so every ',"endsAt":' after '"levels":[' is one
 * level's. */
static slice levels_with_requires(arena *pool, slice tree)
{
    static const char levels[] = "\"levels\":[", ends[] = ",\"endsAt\":",
                      requires[] = "\"requires\":", empty[] = ",\"requires\":[]";
    const char *end = tree.s + tree.len;
    const char *lv = find_bytes(tree.s, end, levels, sizeof levels - 1);
    const char *first = lv ? find_bytes(lv, end, ends, sizeof ends - 1) : NULL;
    if (!first || find_bytes(lv, first, requires, sizeof requires - 1))
        return tree;
    size_t n = 0;
    for (const char *at = first; at; at = find_bytes(at + 1, end, ends, sizeof ends - 1))
        n++;
    char *out = arena_alloc(pool, tree.len + n * (sizeof empty - 1));
    if (!out)
        return tree;
    size_t len = 0;
    const char *from = tree.s;
    for (const char *at = first; at; at = find_bytes(at + 1, end, ends, sizeof ends - 1)) {
        memcpy(out + len, from, (size_t)(at - from));
        len += (size_t)(at - from);
        memcpy(out + len, empty, sizeof empty - 1);
        len += sizeof empty - 1;
        from = at;
    }
    memcpy(out + len, from, (size_t)(end - from));
    len += (size_t)(end - from);
    return (slice){out, len};
}

slice skilltree_compat(arena *pool, slice tree)
{
    return levels_with_requires(pool, skills_with_parents(pool, tree));
}
