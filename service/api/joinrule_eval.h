/* joinrule_eval: a join rule (joinrule.h) handed to the evaluator below the API's layer
 * (jobs/joineval.h): its leaves as plain data, and joinrule_judge over the rule's bytes. */
#ifndef ENTITYD_JOINRULE_EVAL_H
#define ENTITYD_JOINRULE_EVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "api/joinrule.h"
#include "jobs/joineval.h"

/* Fills out from r, set by author (a platform admin: platform). out->tree points at r, which
 * must live until joineval_start has returned (it copies it). */
void joinrule_eval_fill(const joinrule *r, const char *author, bool platform, joineval_rule *out);

/* Parses a stored rule (the join hash's "rule", rendered by joinrule_render) into r: its
 * chains are not checked again (a chain whose URL went since errs when read). Returns 0 or -1. */
int joinrule_eval_parse(const char *json, size_t len, joinrule *r);

#endif
