/* joinbatch: the layout of one chain's aggregate3 batch and the reading of its results. */
#include "rpc/joinbatch.h"

#include <stdlib.h>
#include <string.h>

#include "crypto/address.h"

int joinbatch_parse(const joinread_rule *r, joinbatch_leaf *out)
{
    if (r->leaves < 0 || r->leaves > JOINREAD_MAX_LEAVES)
        return -1;
    for (int i = 0; i < r->leaves; i++) {
        const joinread_leaf *l = &r->leaf[i];
        joinbatch_leaf *o = &out[i];
        memset(o, 0, sizeof *o);
        o->kind = l->kind;
        o->chain = l->chain;
        switch (l->kind) {
        case JOINREAD_LEAF_OTHER:
            continue;
        case JOINREAD_LEAF_ERC20:
        case JOINREAD_LEAF_ERC721:
        case JOINREAD_LEAF_ERC1155:
            if (address_parse(l->contract, strlen(l->contract), o->contract) != 0)
                return -1;
            break;
        case JOINREAD_LEAF_NATIVE:
            break;
        default:
            return -1;
        }
        o->has_token = l->token[0] != '\0';
        if (o->has_token && u256_from_decimal(l->token, strlen(l->token), &o->token) != 0)
            return -1;
        if (l->kind == JOINREAD_LEAF_ERC1155 && !o->has_token)
            return -1;
        if (l->kind != JOINREAD_LEAF_ERC721 && u256_from_decimal(l->min, strlen(l->min), &o->min))
            return -1;
    }
    return 0;
}

static bool is_owner_of(const joinbatch_leaf *l)
{
    return l->kind == JOINREAD_LEAF_ERC721 && l->has_token;
}

/* The calls chain's share holds: one block number, one ownerOf per such leaf, and one call per
 * address per other leaf. */
static size_t count_calls(const joinbatch_leaf *leaves, int nleaves, uint64_t chain, size_t naddrs)
{
    size_t n = 1;
    for (int i = 0; i < nleaves; i++)
        if (leaves[i].kind != JOINREAD_LEAF_OTHER && leaves[i].chain == chain)
            n += is_owner_of(&leaves[i]) ? 1 : naddrs;
    return n;
}

int joinbatch_build(joinbatch *b, const joinbatch_leaf *leaves, int nleaves, uint64_t chain,
                    const uint8_t multicall[20], const uint8_t (*addrs)[20], size_t naddrs)
{
    size_t n = count_calls(leaves, nleaves, chain, naddrs);
    b->calls = calloc(n, sizeof *b->calls);
    b->slot = calloc(n, sizeof *b->slot);
    if (!b->calls || !b->slot) {
        joinbatch_free(b);
        return -1;
    }
    size_t k = 0;
    multicall_block_number(&b->calls[k], multicall);
    b->slot[k++] = (joinbatch_slot){.addr = -1, .leaf = -1};
    for (int i = 0; i < nleaves; i++)
        if (leaves[i].chain == chain && is_owner_of(&leaves[i])) {
            multicall_owner_of(&b->calls[k], &leaves[i].token);
            memcpy(b->calls[k].target, leaves[i].contract, 20);
            b->slot[k++] = (joinbatch_slot){.addr = -1, .leaf = i};
        }
    for (size_t a = 0; a < naddrs; a++)
        for (int i = 0; i < nleaves; i++) {
            const joinbatch_leaf *l = &leaves[i];
            if (l->kind == JOINREAD_LEAF_OTHER || l->chain != chain || is_owner_of(l))
                continue;
            multicall_call *c = &b->calls[k];
            if (l->kind == JOINREAD_LEAF_NATIVE)
                multicall_eth_balance(c, multicall, addrs[a]);
            else if (l->kind == JOINREAD_LEAF_ERC1155)
                multicall_balance_of_1155(c, addrs[a], &l->token);
            else
                multicall_balance_of(c, addrs[a]);
            if (l->kind != JOINREAD_LEAF_NATIVE)
                memcpy(c->target, l->contract, 20);
            b->slot[k++] = (joinbatch_slot){.addr = (int32_t)a, .leaf = i};
        }
    b->ncalls = k;
    b->naddrs = naddrs;
    return 0;
}

void joinbatch_free(joinbatch *b)
{
    free(b->calls);
    free(b->slot);
    b->calls = NULL;
    b->slot = NULL;
    b->ncalls = 0;
}

static void set_value(joinread_value *v, int truth, const u256 *have)
{
    v->truth = truth;
    if (have)
        u256_to_decimal(have, v->have);
    else
        v->have[0] = '\0';
}

/* A balance against its leaf's threshold (an ERC-721 leaf of any token: at least one). */
static void read_balance(const joinbatch_leaf *l, const multicall_result *r, joinread_value *v)
{
    u256 have, one = {{0}};
    if (!r->ok || !multicall_word(r, &have)) {
        set_value(v, JOINREAD_ERROR, NULL);
        return;
    }
    one.b[31] = 1;
    const u256 *need = l->kind == JOINREAD_LEAF_ERC721 ? &one : &l->min;
    set_value(v, u256_cmp(&have, need) >= 0 ? JOINREAD_TRUE : JOINREAD_FALSE, &have);
}

/* ownerOf(token) against each address: a revert (no such token, burnt) is false for all. */
static void read_owner(const joinbatch_slot *s, const multicall_result *r, int nleaves,
                       const uint8_t (*addrs)[20], size_t naddrs, joinread_value *v)
{
    uint8_t owner[20];
    bool known = r->ok && multicall_address(r, owner);
    for (size_t a = 0; a < naddrs; a++) {
        joinread_value *x = &v[a * (size_t)nleaves + (size_t)s->leaf];
        if (!r->ok) {
            x->truth = JOINREAD_FALSE;
            strcpy(x->have, "0");
        } else if (!known) {
            set_value(x, JOINREAD_ERROR, NULL);
        } else {
            bool mine = memcmp(owner, addrs[a], 20) == 0;
            x->truth = mine ? JOINREAD_TRUE : JOINREAD_FALSE;
            strcpy(x->have, mine ? "1" : "0");
        }
    }
}

int joinbatch_read(const joinbatch *b, const joinbatch_leaf *leaves, int nleaves,
                   const uint8_t (*addrs)[20], const multicall_result *res, joinread_value *v,
                   uint64_t *block)
{
    u256 w;
    if (b->ncalls == 0 || !res[0].ok || !multicall_word(&res[0], &w))
        return -1;
    for (int i = 0; i < 24; i++)
        if (w.b[i])
            return -1;
    uint64_t bn = 0;
    for (int i = 24; i < 32; i++)
        bn = bn << 8 | w.b[i];
    for (size_t k = 1; k < b->ncalls; k++) {
        const joinbatch_slot *s = &b->slot[k];
        if (s->addr < 0)
            read_owner(s, &res[k], nleaves, addrs, b->naddrs, v);
        else
            read_balance(&leaves[s->leaf], &res[k],
                         &v[(size_t)s->addr * (size_t)nleaves + (size_t)s->leaf]);
    }
    *block = bn;
    return 0;
}

size_t joinbatch_answer_bound(size_t ncalls)
{
    /* Per result: its offset, success, the bytes' offset and length, and up to two words of
     * data (a balance or an address is one). */
    return 2 + 64 * (2 + 7 * ncalls);
}
