/* Keccak-256 sponge over nettle's Keccak-f[1600] permutation. */
#include "crypto/keccak.h"

#include <string.h>

/* nettle's sha3_256 pads with 0x06 (FIPS 202); Ethereum predates FIPS and pads with 0x01, so
 * only the permutation is borrowed and the sponge lives here. */

static uint64_t load64_le(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static void xor_byte(struct keccak256_ctx *ctx, size_t pos, uint8_t b)
{
    /* Lanes hold bytes little-endian regardless of the host's byte order. */
    ctx->state.a[pos / 8] ^= (uint64_t)b << (8 * (pos % 8));
}

void keccak256_init(struct keccak256_ctx *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
}

void keccak256_update(struct keccak256_ctx *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;

    while (len > 0 && ctx->index != 0) {
        xor_byte(ctx, ctx->index++, *p++);
        len--;
        if (ctx->index == KECCAK256_RATE) {
            sha3_permute(&ctx->state);
            ctx->index = 0;
        }
    }
    /* Whole blocks go in a lane at a time: the common case for long messages. */
    while (len >= KECCAK256_RATE) {
        for (size_t i = 0; i < KECCAK256_RATE / 8; i++) {
            ctx->state.a[i] ^= load64_le(p + 8 * i);
        }
        sha3_permute(&ctx->state);
        p += KECCAK256_RATE;
        len -= KECCAK256_RATE;
    }
    while (len > 0) {
        xor_byte(ctx, ctx->index++, *p++);
        len--;
    }
}

void keccak256_final(struct keccak256_ctx *ctx, uint8_t out[KECCAK256_DIGEST_SIZE])
{
    /* When index is RATE - 1 both padding bits land in the same byte (0x81), as required. */
    xor_byte(ctx, ctx->index, 0x01);
    xor_byte(ctx, KECCAK256_RATE - 1, 0x80);
    sha3_permute(&ctx->state);
    for (size_t i = 0; i < KECCAK256_DIGEST_SIZE; i++) {
        out[i] = (uint8_t)(ctx->state.a[i / 8] >> (8 * (i % 8)));
    }
    keccak256_init(ctx);
}

void keccak256(const void *data, size_t len, uint8_t out[KECCAK256_DIGEST_SIZE])
{
    struct keccak256_ctx ctx;

    keccak256_init(&ctx);
    keccak256_update(&ctx, data, len);
    keccak256_final(&ctx, out);
}
