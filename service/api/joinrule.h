/* joinrule: an entity's join rule (CONTRACT section 16) as a checked tree: parsed from the
 * request's JSON with every refusal naming its field path ("rule.all[2].erc20.min"), and
 * judged in three values from its leaves' values. Neither reads nor calls anything: the leaves'
 * values come from the chains and Redis, asked by whoever holds the rule. */
#ifndef ENTITYD_JOINRULE_H
#define ENTITYD_JOINRULE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/validate.h"
#include "core/ids.h"

#define JOINRULE_MAX_LEAVES 32
#define JOINRULE_MAX_DEPTH  4 /* a leaf alone is depth 1 */
/* Every combinator holds at least one rule, so a tree of 32 leaves and depth 4 has at most 3
 * combinators above each leaf. */
#define JOINRULE_MAX_NODES (JOINRULE_MAX_LEAVES * JOINRULE_MAX_DEPTH)
/* A uint256 in decimal: 78 digits at most. */
#define JOINRULE_UINT256_SIZE 79

typedef enum {
    JR_ALL,
    JR_ANY,
    JR_AT_LEAST,
    JR_NOT,
    JR_ERC20,
    JR_ERC721,
    JR_ERC1155,
    JR_NATIVE,
    JR_LEVEL,
    JR_ROLE,
} jr_kind;

typedef enum { JR_ROLE_OWNER, JR_ROLE_ADMIN, JR_ROLE_MEMBER } jr_role;

typedef struct jr_node {
    jr_kind kind;
    int parent;     /* -1 for the root */
    int first, n;   /* a combinator's children: nodes first .. first + n - 1 */
    int at_least;   /* JR_AT_LEAST */
    int leaf;       /* a leaf's place among the leaves, in the rule's order; -1 otherwise */
    char path[96];  /* "rule.all[2]": where it is in the request */
    uint64_t chain; /* token and native leaves */
    char contract[43];
    char token[JOINRULE_UINT256_SIZE]; /* "" for an erc721 leaf of any token */
    char min[JOINRULE_UINT256_SIZE];
    char entity[IDS_SIZE]; /* level and role leaves */
    char level[65];
    jr_role role;
} jr_node;

/* Children follow their parent, so that node 0 is the root and each combinator's children are
 * consecutive; leaves are numbered in the order the rule lists them. */
typedef struct joinrule {
    jr_node node[JOINRULE_MAX_NODES];
    int nodes, leaves;
    int leaf_node[JOINRULE_MAX_LEAVES]; /* leaf number -> its node */
} joinrule;

/* Whether a chain has a URL (ETH_RPC_URLS): a leaf on one that has none is refused. */
typedef bool (*joinrule_chain_known)(void *ctx, uint64_t chain);

/* Parses and checks `rule` (the body's "rule" member) into out. Returns 0, or -1 with e naming
 * the field path of the first problem. */
int joinrule_parse(const json_t *rule, joinrule_chain_known chain_known, void *ctx, joinrule *out,
                   verr *e);

/* The rule as stored and answered: compact JSON, members in the contract's order, numbers as
 * the contract writes them. The caller frees it (free); NULL when out of memory. */
char *joinrule_render(const joinrule *r);

typedef enum { JR_FALSE, JR_TRUE, JR_ERROR } jr_truth;

/* The rule's value given each leaf's (values[i] for leaf i): `any` is true if a child is true,
 * `all` false if a child is false, `atLeast n` true once n children are true and false once
 * too few can be, `not` of an error an error; anything undecided errs. */
jr_truth joinrule_judge(const joinrule *r, const jr_truth *values);

#endif
