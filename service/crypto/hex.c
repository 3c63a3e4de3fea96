/* Hexadecimal encoding and strict decoding of byte strings. */
#include "crypto/hex.h"

#include <string.h>

/* Digit values by byte, with 0x10 set on every hex digit and 0 for anything else. Explicit,
 * rather than isxdigit: no locale may widen what counts as a digit. A table because addresses
 * and signatures are decoded on every signed request. */
static const uint8_t digit_value[256] = {
    ['0'] = 0x10, ['1'] = 0x11, ['2'] = 0x12, ['3'] = 0x13, ['4'] = 0x14, ['5'] = 0x15,
    ['6'] = 0x16, ['7'] = 0x17, ['8'] = 0x18, ['9'] = 0x19, ['a'] = 0x1a, ['b'] = 0x1b,
    ['c'] = 0x1c, ['d'] = 0x1d, ['e'] = 0x1e, ['f'] = 0x1f, ['A'] = 0x1a, ['B'] = 0x1b,
    ['C'] = 0x1c, ['D'] = 0x1d, ['E'] = 0x1e, ['F'] = 0x1f,
};

/* The two digits of every byte: a signature's revocation id and the caller's address are
 * encoded on every signed request. */
static const char digit_pairs[] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* Bytes decoded in one pass into a local copy, so that a failed decode leaves out untouched
 * (signatures are 65). */
#define ONE_PASS_MAX 128

int hex_digit_value(char c)
{
    uint8_t v = digit_value[(unsigned char)c];
    return v ? v & 0x0f : -1;
}

int hex_decode(const char *s, size_t len, uint8_t *out, size_t out_len)
{
    if (out_len > ((size_t)-1) / 2 || len != 2 * out_len) {
        return -1;
    }
    const unsigned char *u = (const unsigned char *)s;
    unsigned ok = 0x10;
    if (out_len <= ONE_PASS_MAX) {
        uint8_t tmp[ONE_PASS_MAX];
        for (size_t i = 0; i < out_len; i++) {
            uint8_t hi = digit_value[u[2 * i]], lo = digit_value[u[2 * i + 1]];
            ok &= hi & lo;
            tmp[i] = (uint8_t)((hi & 0x0f) << 4 | (lo & 0x0f));
        }
        if (!ok) {
            return -1;
        }
        memcpy(out, tmp, out_len);
        return 0;
    }
    /* Validate everything first so a failed decode leaves out untouched. */
    for (size_t i = 0; i < len; i++) {
        ok &= digit_value[u[i]];
    }
    if (!ok) {
        return -1;
    }
    for (size_t i = 0; i < out_len; i++) {
        out[i] =
            (uint8_t)((digit_value[u[2 * i]] & 0x0f) << 4 | (digit_value[u[2 * i + 1]] & 0x0f));
    }
    return 0;
}

void hex_encode(const uint8_t *in, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        memcpy(out + 2 * i, digit_pairs + 2 * in[i], 2);
    }
    out[2 * len] = '\0';
}
