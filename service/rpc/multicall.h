/* multicall: the calls join rules make (CONTRACT section 16) in Ethereum's ABI, batched into one
 * Multicall3 `aggregate3` call: each call allowed to fail on its own, so one reverting
 * contract fails only its own leaf; a `getBlockNumber` among them says at which block the whole
 * batch ran (one eth_call runs at one block). Encoding and decoding only: no I/O. Decoding
 * takes what an RPC provider answered, so every offset and length is checked. */
#ifndef ENTITYD_MULTICALL_H
#define ENTITYD_MULTICALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* A 256-bit unsigned integer, big-endian as the ABI writes it. */
typedef struct u256 {
    uint8_t b[32];
} u256;

/* Parses a decimal string of at most 78 digits (no sign); -1 past 2^256 - 1 or malformed. */
int u256_from_decimal(const char *s, size_t len, u256 *out);
/* Writes the decimal form (at most 78 digits and a NUL) into out. */
void u256_to_decimal(const u256 *v, char out[79]);
int u256_cmp(const u256 *a, const u256 *b);

/* One call of a batch: a contract and its call data (selector and arguments). */
#define MULTICALL_DATA_MAX 68 /* the largest call below: a selector and two words */
typedef struct multicall_call {
    uint8_t target[20];
    uint8_t data[MULTICALL_DATA_MAX];
    size_t len;
} multicall_call;

/* The calls' data (target set by the caller where it is the token's contract):
 * ERC-20 and ERC-721 balanceOf(owner), ERC-721 ownerOf(tokenId), ERC-1155
 * balanceOf(owner, id), and Multicall3's own getEthBalance(addr) and getBlockNumber(). */
void multicall_balance_of(multicall_call *c, const uint8_t owner[20]);
void multicall_owner_of(multicall_call *c, const u256 *token);
void multicall_balance_of_1155(multicall_call *c, const uint8_t owner[20], const u256 *token);
void multicall_eth_balance(multicall_call *c, const uint8_t multicall[20], const uint8_t who[20]);
void multicall_block_number(multicall_call *c, const uint8_t multicall[20]);

/* Appends "0x" and the hex of aggregate3(calls) (every call allowFailure = true) to out, the
 * `data` of an eth_call to the Multicall3 contract. Returns 0, or -1 out of memory. */
int multicall_encode(const multicall_call *calls, size_t n, buf *out);

/* One call's outcome: whether it succeeded, and its return data (pointing into the decoded
 * bytes the caller keeps). */
typedef struct multicall_result {
    bool ok;
    const uint8_t *data;
    size_t len;
} multicall_result;

/* Decodes aggregate3's return data, given as the bytes of the eth_call's hex result (decoded
 * by the caller), into n results. Returns 0, or -1 when it is not n well-formed results. */
int multicall_decode(const uint8_t *ret, size_t len, multicall_result *out, size_t n);

/* A result's return data read as one uint256 word, or an address word; false when it is not
 * one (too short, or an address word with bits above 160). */
bool multicall_word(const multicall_result *r, u256 *out);
bool multicall_address(const multicall_result *r, uint8_t out[20]);

#endif
