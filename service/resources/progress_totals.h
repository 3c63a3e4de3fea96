/* progress_totals: a member's totals over the skill tree of a progression template (CONTRACT
 * §15): a skill's total is its own score plus its children's totals, computed on every read
 * from the own scores ("s:<skill id>" in the prog hash) and the template's current tree. */
#ifndef ENTITYD_PROGRESS_TOTALS_H
#define ENTITYD_PROGRESS_TOTALS_H

#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "core/arena.h"
#include "http/request.h"

/* One skill of the tree, in the template's (pre-)order. */
typedef struct tree_skill {
    slice id, name; /* name: a JSON string as stored */
    int64_t own, total;
    int32_t parent; /* its index, -1 for a root (or a parent not in the tree) */
} tree_skill;

/* The tree's skills, and an open-addressing index of their ids (slots hold index + 1). */
typedef struct skill_totals {
    tree_skill *skills;
    size_t n;
    uint32_t *slots;
    size_t mask;
} skill_totals;

/* Whether the template has a tree (its first line "T", lua/_prelude.lua progtpl_build): in a
 * flat list every total is the own score, and nothing need be built. */
bool progress_tpl_nested(slice tpl);

/* Builds *out from a nested template and the prog hash as a flat array, in pool. False when
 * out of memory. A score of a skill not in the template (deleted) counts nowhere. */
bool progress_totals_build(arena *pool, slice tpl, const redisReply *prog, skill_totals *out);

/* The total of skill id (0 for one unknown or never awarded). */
int64_t progress_total_of(const skill_totals *t, slice id);

/* Splits *rest at its first `sep` (the progression template's lines, columns and pairs): the
 * part before is returned, *rest moves past the separator. */
slice progress_next_field(slice *rest, char sep);

/* A decimal integer of the template or a prog hash (at most 19 digits, an optional '-'); 0 for
 * anything else. */
int64_t progress_parse_int(const char *s, size_t n);

#endif
