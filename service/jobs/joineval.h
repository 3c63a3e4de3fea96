/* joineval: the value of an entity's join rule (CONTRACT section 16) for 1..JOINEVAL_MAX_ADDRS
 * addresses at once: the token and native leaves read from the chains (rpc/joinread.h), the
 * level and role leaves from Redis (lua/join_facts.lua, one read per entity a leaf names, each
 * in its own slot), then the rule judged per address in three values. A level or role leaf
 * naming an entity the rule's author may no longer read (CONTRACT section 3: a private entity
 * is readable by its owners, admins and members; a disabled one by its owners), or a deleted
 * one, is false.
 *
 * The rule itself (api/joinrule.h) lies above jobs in the layers, so its holder hands it over
 * as a joineval_rule: its leaves as plain data, and the judge of its tree as a function with
 * the tree's bytes (api/joinrule_eval.h fills one from a joinrule). Used by the check and join
 * routes (resources/joinrules.c) and by the re-check of rules members. */
#ifndef ENTITYD_JOINEVAL_H
#define ENTITYD_JOINEVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/ids.h"
#include "rpc/joinread.h"

struct store;

#define JOINEVAL_MAX_ADDRS  JOINREAD_MAX_ADDRS
#define JOINEVAL_MAX_LEAVES JOINREAD_MAX_LEAVES

/* Truth values, numbered as jr_truth's (api/joinrule.h) and joinread's. */
enum joineval_truth { JOINEVAL_FALSE, JOINEVAL_TRUE, JOINEVAL_ERROR };

/* A leaf read from Redis; JOINEVAL_LOCAL_NONE for a token or native leaf. */
enum joineval_local_kind { JOINEVAL_LOCAL_NONE, JOINEVAL_LOCAL_LEVEL, JOINEVAL_LOCAL_ROLE };
/* A role leaf holds at that role or above it (owner > admin > member). */
enum joineval_role { JOINEVAL_ROLE_OWNER, JOINEVAL_ROLE_ADMIN, JOINEVAL_ROLE_MEMBER };

typedef struct joineval_local {
    int kind; /* enum joineval_local_kind */
    char entity[IDS_SIZE];
    char level[65]; /* JOINEVAL_LOCAL_LEVEL: the level id */
    int role;       /* JOINEVAL_LOCAL_ROLE: enum joineval_role */
} joineval_local;

/* The judge of the rule's tree: its value given each leaf's (values[i], enum joineval_truth). */
typedef int (*joineval_judge)(const void *tree, const int *values);

typedef struct joineval_rule {
    int leaves;                                /* the rule's leaves, in its order */
    joinread_rule chain;                       /* token and native leaves (the others OTHER) */
    joineval_local local[JOINEVAL_MAX_LEAVES]; /* level and role leaves (the others NONE) */
    char author[43];                           /* who set the rule (updatedBy) */
    bool author_platform;                      /* a platform admin: reads every entity */
    joineval_judge judge;
    const void *tree; /* plain bytes (no pointers), copied by joineval_start */
    size_t tree_size;
} joineval_rule;

enum joineval_status {
    JOINEVAL_OK,
    JOINEVAL_UNAVAILABLE, /* a chain failed or timed out: its leaves err */
    JOINEVAL_CAPPED,      /* JOIN_RPC_MAX_PER_SECOND spent: the chain leaves err; retry_after */
};

/* One (address, leaf). have: "" when nothing to show; a token or native leaf's balance (an
 * erc721 leaf with tokenId: "1"/"0"); a level leaf's reachedAt (ISO 8601); a role leaf's role
 * held in that entity ("owner", "admin", "member"). error: NULL unless truth is
 * JOINEVAL_ERROR, then a sentence (static storage). */
typedef struct joineval_value {
    int truth;
    char have[79];
    const char *error;
} joineval_value;

typedef struct joineval_answer {
    int status;          /* enum joineval_status */
    int64_t retry_after; /* seconds, with JOINEVAL_CAPPED or UNAVAILABLE (>= 1) */
    size_t naddrs;
    int nleaves;
    const int *verdict;      /* [a]: the rule's value for address a (enum joineval_truth) */
    const joineval_value *v; /* [a * nleaves + leaf] */
    int nchains;             /* the chains read, with the block each batch ran at */
    uint64_t chain[JOINREAD_MAX_CHAINS];
    uint64_t block[JOINREAD_MAX_CHAINS];
} joineval_answer;

/* Runs once per evaluation, on the loop, never inside joineval_start; the answer is valid
 * during the callback only. */
typedef void (*joineval_cb)(void *data, const joineval_answer *a);

/* Evaluates r for addrs (lowercase "0x…" addresses, 1..JOINEVAL_MAX_ADDRS; r, its tree and
 * addrs are copied). jr: the chain reader, or NULL (the token and native leaves then err; so
 * too when the reader refuses the read, with status JOINEVAL_UNAVAILABLE). background: the
 * re-check's evaluations (joinread_start's). Returns 0, or -1 (cb will not run: n out of range,
 * or out of memory). */
int joineval_start(uv_loop_t *loop, struct store *st, joinread *jr, const joineval_rule *r,
                   const char (*addrs)[43], size_t n, bool background, joineval_cb cb, void *data);

/* What a leaf asks for, as the check's "need" shows it: a token or native leaf's min ("1" for
 * an erc721 leaf), a level leaf's level id, a role leaf's role. */
const char *joineval_need(const joineval_rule *r, int leaf);

#endif
