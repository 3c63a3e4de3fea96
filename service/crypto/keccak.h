/* Keccak-256 as Ethereum uses it (original Keccak padding, not FIPS SHA-3). */
#ifndef ENTITYD_KECCAK_H
#define ENTITYD_KECCAK_H

#include <stddef.h>
#include <stdint.h>

#include <nettle/sha3.h>

#define KECCAK256_DIGEST_SIZE 32
/* 1600-bit state minus a 512-bit capacity. */
#define KECCAK256_RATE 136

struct keccak256_ctx {
    struct sha3_state state;
    size_t index; /* bytes absorbed into the current block, 0 .. KECCAK256_RATE - 1 */
};

/* Starts a new hash in ctx (caller-owned storage). */
void keccak256_init(struct keccak256_ctx *ctx);

/* Absorbs len bytes of data; data may be NULL when len is 0. */
void keccak256_update(struct keccak256_ctx *ctx, const void *data, size_t len);

/* Writes the 32-byte digest to out and re-initialises ctx, so it can start a new hash. */
void keccak256_final(struct keccak256_ctx *ctx, uint8_t out[KECCAK256_DIGEST_SIZE]);

/* One-shot Keccak-256 of len bytes of data into out. */
void keccak256(const void *data, size_t len, uint8_t out[KECCAK256_DIGEST_SIZE]);

#endif
