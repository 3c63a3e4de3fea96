/* joinbatch: one chain's share of a join read laid out as the calls of one aggregate3 batch, and
 * its results read back into (address, leaf) values. No I/O: joinread sends and receives. */
#ifndef ENTITYD_JOINBATCH_H
#define ENTITYD_JOINBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/joinread.h"
#include "rpc/multicall.h"

/* A leaf parsed once for every address it is read for. */
typedef struct joinbatch_leaf {
    int kind; /* enum joinread_kind */
    uint64_t chain;
    uint8_t contract[20];
    bool has_token;
    u256 token, min;
} joinbatch_leaf;

/* What call i asks: leaf `leaf` of address `addr`; addr -1 for a call that serves every address
 * (an ERC-721 ownerOf of one token); leaf -1 for getBlockNumber. */
typedef struct joinbatch_slot {
    int32_t addr;
    int32_t leaf;
} joinbatch_slot;

typedef struct joinbatch {
    multicall_call *calls;
    joinbatch_slot *slot;
    size_t ncalls;
    size_t naddrs;
} joinbatch;

/* Parses r's leaves into out (r->leaves of them). Returns 0, or -1 when a token or native leaf
 * is malformed (a contract that is no address, a number that is no uint256). */
int joinbatch_parse(const joinread_rule *r, joinbatch_leaf *out);

/* Lays out chain's share: getBlockNumber first, then per address every leaf on chain (an
 * ERC-721 ownerOf once, before the addresses). Returns 0, or -1 out of memory. */
int joinbatch_build(joinbatch *b, const joinbatch_leaf *leaves, int nleaves, uint64_t chain,
                    const uint8_t multicall[20], const uint8_t (*addrs)[20], size_t naddrs);
void joinbatch_free(joinbatch *b);

/* Reads b's results (b->ncalls of them) into v[a * nleaves + leaf] and the batch's block.
 * Returns 0, or -1 when the block cannot be read (the answer is not the batch's). A failed
 * call errs its own values only; a reverted ownerOf is false. */
int joinbatch_read(const joinbatch *b, const joinbatch_leaf *leaves, int nleaves,
                   const uint8_t (*addrs)[20], const multicall_result *res, joinread_value *v,
                   uint64_t *block);

/* An upper bound of aggregate3's answer for ncalls calls, as hex characters: more means a
 * contract answered far more than a balance (the batch then fails). */
size_t joinbatch_answer_bound(size_t ncalls);

#endif
