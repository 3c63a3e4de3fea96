/* joinrule_eval: a join rule for the evaluator (joinrule_eval.h). */
#include "api/joinrule_eval.h"

#include <stdio.h>
#include <string.h>

static int judge(const void *tree, const int *values)
{
    jr_truth v[JOINRULE_MAX_LEAVES];
    const joinrule *r = tree;
    for (int i = 0; i < r->leaves; i++)
        v[i] = values[i] == JOINEVAL_TRUE    ? JR_TRUE
               : values[i] == JOINEVAL_FALSE ? JR_FALSE
                                             : JR_ERROR;
    jr_truth t = joinrule_judge(r, v);
    return t == JR_TRUE ? JOINEVAL_TRUE : t == JR_FALSE ? JOINEVAL_FALSE : JOINEVAL_ERROR;
}

static int chain_kind(jr_kind k)
{
    switch (k) {
    case JR_ERC20:
        return JOINREAD_LEAF_ERC20;
    case JR_ERC721:
        return JOINREAD_LEAF_ERC721;
    case JR_ERC1155:
        return JOINREAD_LEAF_ERC1155;
    case JR_NATIVE:
        return JOINREAD_LEAF_NATIVE;
    default:
        return JOINREAD_LEAF_OTHER;
    }
}

void joinrule_eval_fill(const joinrule *r, const char *author, bool platform, joineval_rule *out)
{
    memset(out, 0, sizeof *out);
    out->leaves = r->leaves;
    out->chain.leaves = r->leaves;
    for (int i = 0; i < r->leaves; i++) {
        const jr_node *n = &r->node[r->leaf_node[i]];
        joinread_leaf *c = &out->chain.leaf[i];
        joineval_local *l = &out->local[i];
        c->kind = chain_kind(n->kind);
        if (c->kind != JOINREAD_LEAF_OTHER) {
            c->chain = n->chain;
            memcpy(c->contract, n->contract, sizeof c->contract);
            memcpy(c->token, n->token, sizeof c->token);
            memcpy(c->min, n->min, sizeof c->min);
        } else if (n->kind == JR_LEVEL) {
            l->kind = JOINEVAL_LOCAL_LEVEL;
            memcpy(l->entity, n->entity, sizeof l->entity);
            snprintf(l->level, sizeof l->level, "%s", n->level);
        } else if (n->kind == JR_ROLE) {
            l->kind = JOINEVAL_LOCAL_ROLE;
            memcpy(l->entity, n->entity, sizeof l->entity);
            l->role = n->role == JR_ROLE_OWNER   ? JOINEVAL_ROLE_OWNER
                      : n->role == JR_ROLE_ADMIN ? JOINEVAL_ROLE_ADMIN
                                                 : JOINEVAL_ROLE_MEMBER;
        }
    }
    snprintf(out->author, sizeof out->author, "%s", author);
    out->author_platform = platform;
    out->judge = judge;
    out->tree = r;
    out->tree_size = sizeof *r;
}

static bool any_chain(void *ctx, uint64_t chain)
{
    (void)ctx;
    (void)chain;
    return true;
}

int joinrule_eval_parse(const char *json, size_t len, joinrule *r)
{
    json_t *j = json_loadb(json, len, 0, NULL);
    if (!j)
        return -1;
    verr e;
    int rc = joinrule_parse(j, any_chain, NULL, r, &e);
    json_decref(j);
    return rc;
}
