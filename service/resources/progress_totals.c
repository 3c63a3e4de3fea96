/* progress_totals: totals rolled up over the template's tree for one progress read. The tree
 * is cut again on every read, so a moved branch or a deleted leaf changes totals at once with
 * nothing stored to rebuild; a flat list never comes here (progress_tpl_nested). */
#include <string.h>

#include "resources/progress_totals.h"

slice progress_next_field(slice *rest, char sep)
{
    const char *at = memchr(rest->s, sep, rest->len);
    slice out = {rest->s, at ? (size_t)(at - rest->s) : rest->len};
    size_t skip = at ? out.len + 1 : out.len;
    rest->s += skip;
    rest->len -= skip;
    return out;
}

/* How far a score is added up the tree: depth is at most 8 (CONTRACT §15); the bound also
 * ends a walk over a template a bug left with a cycle. */
#define TOTALS_WALK_MAX 16

bool progress_tpl_nested(slice tpl)
{
    return tpl.len >= 2 && tpl.s[0] == 'T' && tpl.s[1] == '\n';
}

static uint32_t totals_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static long totals_find(const skill_totals *t, const char *s, size_t n)
{
    if (!t->slots)
        return -1;
    for (size_t k = totals_hash(s, n) & t->mask, probes = 0; probes <= t->mask;
         k = (k + 1) & t->mask, probes++) {
        uint32_t at = t->slots[k];
        if (!at)
            return -1;
        const tree_skill *sk = &t->skills[at - 1];
        if (sk->id.len == n && !memcmp(sk->id.s, s, n))
            return (long)(at - 1);
    }
    return -1;
}

static void totals_insert(skill_totals *t, size_t i)
{
    const tree_skill *sk = &t->skills[i];
    size_t k = totals_hash(sk->id.s, sk->id.len) & t->mask;
    while (t->slots[k])
        k = (k + 1) & t->mask;
    t->slots[k] = (uint32_t)(i + 1);
}

int64_t progress_parse_int(const char *s, size_t n)
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

/* Cuts the S lines ("S\t<id>\t<name>\t<parent id>") into t->skills; the parents' indexes are
 * found once every id is indexed (a parent comes first in pre-order, but the walk does not
 * rely on it). */
static bool totals_cut(arena *pool, slice tpl, skill_totals *t, slice **parents)
{
    size_t cap = 1;
    for (size_t i = 0; i < tpl.len; i++)
        cap += tpl.s[i] == '\n';
    size_t slots = 4;
    while (slots < 2 * cap)
        slots <<= 1;
    t->skills = arena_alloc(pool, cap * sizeof *t->skills);
    t->slots = arena_alloc(pool, slots * sizeof *t->slots);
    *parents = arena_alloc(pool, cap * sizeof **parents);
    if (!t->skills || !t->slots || !*parents)
        return false;
    t->mask = slots - 1;
    t->n = 0;
    while (tpl.len && t->n < cap) {
        slice line = progress_next_field(&tpl, '\n');
        if (line.len < 2 || line.s[0] != 'S' || line.s[1] != '\t')
            continue;
        line.s += 2, line.len -= 2;
        tree_skill *sk = &t->skills[t->n];
        sk->id = progress_next_field(&line, '\t');
        sk->name = progress_next_field(&line, '\t');
        (*parents)[t->n] = progress_next_field(&line, '\t');
        sk->own = sk->total = 0;
        sk->parent = -1;
        if (!sk->id.len || totals_find(t, sk->id.s, sk->id.len) >= 0)
            continue;
        totals_insert(t, t->n);
        t->n++;
    }
    return true;
}

bool progress_totals_build(arena *pool, slice tpl, const redisReply *prog, skill_totals *out)
{
    slice *parents;
    memset(out, 0, sizeof *out);
    if (!totals_cut(pool, tpl, out, &parents))
        return false;
    for (size_t i = 0; i < out->n; i++)
        out->skills[i].parent = (int32_t)totals_find(out, parents[i].s, parents[i].len);
    for (size_t i = 0; prog && i + 1 < prog->elements; i += 2) {
        const redisReply *k = prog->element[i], *v = prog->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || k->len < 3 ||
            k->str[0] != 's' || k->str[1] != ':')
            continue;
        long at = totals_find(out, k->str + 2, k->len - 2);
        if (at >= 0)
            out->skills[at].own = progress_parse_int(v->str, v->len);
    }
    /* Each own score up its branch: O(scored skills × depth), whatever the tree's size. */
    for (size_t i = 0; i < out->n; i++) {
        int64_t own = out->skills[i].own;
        long at = (long)i;
        for (int step = 0; own && at >= 0 && step < TOTALS_WALK_MAX; step++) {
            out->skills[at].total += own;
            at = out->skills[at].parent;
        }
    }
    return true;
}

int64_t progress_total_of(const skill_totals *t, slice id)
{
    long at = totals_find(t, id.s, id.len);
    return at >= 0 ? t->skills[at].total : 0;
}
