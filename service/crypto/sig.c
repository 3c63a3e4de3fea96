/* Ethereum signatures: parsing (65-byte and EIP-2098), EIP-191 hashing, recovery, signing. */
#include "crypto/sig.h"

#include <stdio.h>
#include <string.h>

#include <secp256k1_recovery.h>

#include "crypto/address.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"

/* The secp256k1 group order n and n/2, big-endian. */
static const uint8_t curve_n[32] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
};
static const uint8_t curve_half_n[32] = {
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
};

static int is_zero(const uint8_t x[32])
{
    uint8_t acc = 0;

    for (size_t i = 0; i < 32; i++) {
        acc |= x[i];
    }
    return acc == 0;
}

/* Big-endian byte arrays of equal length compare like the numbers they hold. */
static int in_range(const uint8_t x[32])
{
    return !is_zero(x) && memcmp(x, curve_n, 32) < 0;
}

static int is_high(const uint8_t s[32])
{
    return memcmp(s, curve_half_n, 32) > 0;
}

int sig_parse(const char *s, size_t len, eth_sig *out)
{
    uint8_t b[65];
    eth_sig sig;

    if (len >= 2 && s[0] == '0' && s[1] == 'x') {
        s += 2;
        len -= 2;
    }
    if (len == 130) {
        if (hex_decode(s, len, b, 65) != 0) {
            return SIG_EHEX;
        }
        switch (b[64]) {
        case 0:
        case 1:
            sig.recid = b[64];
            break;
        case 27:
        case 28:
            sig.recid = b[64] - 27;
            break;
        default:
            return SIG_EV;
        }
    } else if (len == 128) {
        if (hex_decode(s, len, b, 64) != 0) {
            return SIG_EHEX;
        }
        sig.recid = b[32] >> 7;
        b[32] &= 0x7f;
    } else {
        return SIG_ELENGTH;
    }
    memcpy(sig.r, b, 32);
    memcpy(sig.s, b + 32, 32);
    if (!in_range(sig.r) || !in_range(sig.s)) {
        return SIG_ERANGE;
    }
    /* libsecp256k1 recovers from high-s too (n - s with the other parity names the same key);
     * refusing it keeps one spelling per signature, which revocation depends on. */
    if (is_high(sig.s)) {
        return SIG_EHIGHS;
    }
    *out = sig;
    return SIG_OK;
}

const char *sig_strerror(int err)
{
    switch (err) {
    case SIG_OK:
        return "The signature is well formed.";
    case SIG_EHEX:
        return "The signature contains a character that is not a hex digit.";
    case SIG_ELENGTH:
        return "The signature must be 130 hex digits (r, s, v) or 128 (EIP-2098 compact), "
               "optionally prefixed with 0x.";
    case SIG_EV:
        return "The signature's v byte must be 27, 28, 0 or 1.";
    case SIG_ERANGE:
        return "The signature's r or s is zero or not below the secp256k1 group order.";
    case SIG_EHIGHS:
        return "The signature has a high s value, which EIP-2 forbids; use the low-s form.";
    default:
        return "The signature is invalid.";
    }
}

void sig_personal_hash(const void *msg, size_t len, uint8_t out[32])
{
    static const char prefix[] = "\x19"
                                 "Ethereum Signed Message:\n";
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%zu", len);
    struct keccak256_ctx ctx;

    keccak256_init(&ctx);
    keccak256_update(&ctx, prefix, sizeof(prefix) - 1);
    keccak256_update(&ctx, digits, (size_t)n);
    keccak256_update(&ctx, msg, len);
    keccak256_final(&ctx, out);
}

int sig_recover(const secp256k1_context *ctx, const eth_sig *sig, const uint8_t hash[32],
                uint8_t addr_out[20])
{
    uint8_t compact[64], pub[65];
    size_t pub_len = sizeof(pub);
    secp256k1_ecdsa_recoverable_signature rsig;
    secp256k1_pubkey pubkey;

    /* Re-checked here because an eth_sig need not come from sig_parse. */
    if ((sig->recid != 0 && sig->recid != 1) || is_high(sig->s)) {
        return -1;
    }
    memcpy(compact, sig->r, 32);
    memcpy(compact + 32, sig->s, 32);
    if (!secp256k1_ecdsa_recoverable_signature_parse_compact(ctx, &rsig, compact, sig->recid) ||
        !secp256k1_ecdsa_recover(ctx, &pubkey, &rsig, hash) ||
        !secp256k1_ec_pubkey_serialize(ctx, pub, &pub_len, &pubkey, SECP256K1_EC_UNCOMPRESSED)) {
        return -1;
    }
    address_from_pubkey(pub, addr_out);
    return 0;
}

int sig_sign(const secp256k1_context *ctx, const uint8_t seckey[32], const uint8_t hash[32],
             eth_sig *out)
{
    secp256k1_ecdsa_recoverable_signature rsig;
    uint8_t compact[64];
    int recid;

    if (!secp256k1_ecdsa_sign_recoverable(ctx, &rsig, hash, seckey, NULL, NULL)) {
        return -1;
    }
    secp256k1_ecdsa_recoverable_signature_serialize_compact(ctx, compact, &recid, &rsig);
    memcpy(out->r, compact, 32);
    memcpy(out->s, compact + 32, 32);
    out->recid = recid;
    return 0;
}

void sig_format(const eth_sig *sig, char out[SIG_STRING_SIZE])
{
    uint8_t v = (uint8_t)(27 + sig->recid);

    out[0] = '0';
    out[1] = 'x';
    hex_encode(sig->r, 32, out + 2);
    hex_encode(sig->s, 32, out + 66);
    hex_encode(&v, 1, out + 130);
}

void sig_format_compact(const eth_sig *sig, char out[SIG_COMPACT_STRING_SIZE])
{
    uint8_t s[32];

    memcpy(s, sig->s, 32);
    s[0] = (uint8_t)(s[0] | (sig->recid & 1) << 7);
    out[0] = '0';
    out[1] = 'x';
    hex_encode(sig->r, 32, out + 2);
    hex_encode(s, 32, out + 66);
}

void sig_revocation_id(const eth_sig *sig, char out[SIG_REVOCATION_ID_SIZE])
{
    hex_encode(sig->r, 32, out);
    hex_encode(sig->s, 32, out + 64);
}
