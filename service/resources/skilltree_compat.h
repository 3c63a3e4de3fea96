/* skilltree_compat: the stored skill tree (keys.h, the entity hash's "skilltree") as this
 * release shows it, when an earlier release rendered it: Skill objects without parentId and
 * depth read as roots (parentId null, depth 0), Level objects without requires read with
 * requires []. The stored bytes stay until the entity's next skill or level write renders the
 * tree again (lua/_prelude.lua, render_skilltree), which every release since writes whole. */
#ifndef ENTITYD_SKILLTREE_COMPAT_H
#define ENTITYD_SKILLTREE_COMPAT_H

#include "core/arena.h"
#include "http/request.h"

/* The tree as this release shows it: `tree` itself when nothing is missing (judged on the
 * first skill and the first level, so a current tree costs a scan of those two), else a copy
 * in `pool` with the missing fields added (`tree` again when the pool is out of memory). */
slice skilltree_compat(arena *pool, slice tree);

#endif
