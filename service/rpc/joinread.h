/* joinread: the chain reads of join rules (CONTRACT section 16): a rule's token and native
 * leaves for up to JOINREAD_MAX_ADDRS addresses, read with ONE eth_call of Multicall3
 * `aggregate3` per chain the rule names (every leaf for every address, plus getBlockNumber), so
 * each chain's answers come from one block. Calls are capped per chain and instance
 * (JOIN_RPC_MAX_PER_SECOND), apart from sign-in's.
 *
 * Types adjusted from the shared design: rpc sits below api in the layers, so this header does
 * not include api/joinrule.h. The rule is handed over as a joinread_rule (its leaves, in the
 * rule's order: fill leaf[i] from r->node[r->leaf_node[i]], kind from the node's jr_kind), and
 * a value's truth is an int holding JOINREAD_FALSE / JOINREAD_TRUE / JOINREAD_ERROR, numbered as
 * jr_truth's JR_FALSE / JR_TRUE / JR_ERROR. The names are the design's. */
#ifndef ENTITYD_JOINREAD_H
#define ENTITYD_JOINREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct config;

typedef struct joinread joinread;

#define JOINREAD_MAX_ADDRS  500
#define JOINREAD_MAX_LEAVES 32 /* JOINRULE_MAX_LEAVES */
#define JOINREAD_MAX_CHAINS 8  /* ETH_RPC_URLS (with ETH_RPC_URL) names at most this many */

enum joinread_status {
    JOINREAD_OK,
    JOINREAD_UNAVAILABLE, /* a chain failed, timed out or answered what does not decode */
    JOINREAD_CAPPED,      /* JOIN_RPC_MAX_PER_SECOND spent; retry_after set */
};

/* jr_truth's values (api/joinrule.h), so that a value's truth goes to joinrule_judge as is. */
enum joinread_truth { JOINREAD_FALSE, JOINREAD_TRUE, JOINREAD_ERROR };

/* A leaf's kind; JOINREAD_LEAF_OTHER for level and role leaves (not read here). */
enum joinread_kind {
    JOINREAD_LEAF_OTHER,
    JOINREAD_LEAF_ERC20,
    JOINREAD_LEAF_ERC721,
    JOINREAD_LEAF_ERC1155,
    JOINREAD_LEAF_NATIVE,
};

/* One leaf as jr_node holds it. */
typedef struct joinread_leaf {
    int kind; /* enum joinread_kind */
    uint64_t chain;
    char contract[43]; /* "0x" and 40 hex digits */
    char token[79];    /* decimal; "" for an erc721 leaf of any token */
    char min[79];      /* decimal; erc20, erc1155, native */
} joinread_leaf;

typedef struct joinread_rule {
    int leaves; /* r->leaves */
    joinread_leaf leaf[JOINREAD_MAX_LEAVES];
} joinread_rule;

typedef struct joinread_value { /* one (address, leaf) */
    int truth;                  /* JOINREAD_TRUE / _FALSE / _ERROR (that call failed) */
    char have[79];              /* decimal: balance, or for erc721 with tokenId "1"/"0" */
} joinread_value;

typedef struct joinread_answer {
    int status;          /* enum joinread_status */
    int64_t retry_after; /* with JOINREAD_CAPPED: seconds until the cap has room (>= 1) */
    size_t naddrs;
    int nleaves;             /* the rule's leaves (r->leaves) */
    const joinread_value *v; /* [a * nleaves + leaf]; level/role leaves untouched (JOINREAD_ERROR,
                              * have ""), and so are the leaves of a chain that failed (status
                              * UNAVAILABLE, its block 0) or of every chain when CAPPED */
    int nchains;             /* the chains the rule names, in the order of their first leaf */
    uint64_t chain[JOINREAD_MAX_CHAINS];
    uint64_t block[JOINREAD_MAX_CHAINS]; /* the block each chain's batch ran at */
} joinread_answer;

/* Runs once per read, on the loop, never inside joinread_start; the answer (and v) is valid
 * during the callback only. */
typedef void (*joinread_cb)(void *data, const joinread_answer *a);

/* A reader of the chains of cfg (ETH_RPC_URLS, ETH_RPC_URL for AUTH_CHAIN_ID,
 * MULTICALL3_ADDRESS, JOIN_RPC_MAX_PER_SECOND, ETH_RPC_TIMEOUT_MS, ETH_RPC_MAX_INFLIGHT).
 * Returns 0, or -1 with err set. */
int joinread_new(joinread **out, uv_loop_t *loop, const struct config *cfg, char *err,
                 size_t err_len);
/* Whether chain has a URL: joinrule_parse's chain_known (ctx is the joinread). */
bool joinread_chain_known(void *ctx, uint64_t chain);
/* Whether r has a token or native leaf (none: no chain is asked). */
bool joinread_has_chain_leaves(const joinread_rule *r);
/* Reads r's token and native leaves for addrs (1..JOINREAD_MAX_ADDRS; r and addrs copied): ONE
 * eth_call of aggregate3 per chain the rule names (all its leaves x all addrs, plus
 * getBlockNumber), so the batch is pinned to one block. background: the sweep's reads (they
 * wait for the rate cap's room instead of answering CAPPED). Returns 0, or -1 (cb will not run)
 * when n is out of range, a leaf names a chain without a URL, the background queue is full or
 * memory runs out. A rule without chain leaves answers OK (every leaf untouched). */
int joinread_start(joinread *j, const joinread_rule *r, const uint8_t (*addrs)[20], size_t n,
                   bool background, joinread_cb cb, void *data);
/* Fails the reads in flight or waiting (JOINREAD_UNAVAILABLE, callbacks run) and closes the
 * handles; the loop then runs until they are closed. */
void joinread_close(joinread *j);
/* Frees it after joinread_close and the loop's run; accepts NULL. */
void joinread_free(joinread *j);

#endif
