/* Solidity ABI encoding of the one call the service makes: EIP-1271 isValidSignature. */
#include "crypto/abi.h"

#include <string.h>

#include "crypto/hex.h"

static size_t padded(size_t n)
{
    return (n + 31) / 32 * 32;
}

size_t abi_is_valid_signature_size(size_t sig_len)
{
    return 2 + 2 * (4 + 3 * 32 + padded(sig_len)) + 1;
}

/* One 32-byte big-endian word holding v. */
static void word_uint(uint8_t out[32], uint64_t v)
{
    memset(out, 0, 32);
    for (int i = 0; i < 8; i++)
        out[31 - i] = (uint8_t)(v >> (8 * i));
}

size_t abi_is_valid_signature(const uint8_t hash[32], const uint8_t *sig, size_t sig_len, char *out,
                              size_t cap)
{
    size_t need = abi_is_valid_signature_size(sig_len);
    if (cap < need)
        return 0;
    uint8_t head[4 + 3 * 32];
    head[0] = (uint8_t)(ABI_IS_VALID_SIGNATURE_SELECTOR >> 24);
    head[1] = (uint8_t)(ABI_IS_VALID_SIGNATURE_SELECTOR >> 16);
    head[2] = (uint8_t)(ABI_IS_VALID_SIGNATURE_SELECTOR >> 8);
    head[3] = (uint8_t)ABI_IS_VALID_SIGNATURE_SELECTOR;
    memcpy(head + 4, hash, 32);
    /* The dynamic argument's offset counts from the start of the arguments: two head words. */
    word_uint(head + 36, 64);
    word_uint(head + 68, sig_len);
    char *p = out;
    *p++ = '0';
    *p++ = 'x';
    hex_encode(head, sizeof head, p);
    p += 2 * sizeof head;
    hex_encode(sig, sig_len, p);
    p += 2 * sig_len;
    size_t pad = padded(sig_len) - sig_len;
    memset(p, '0', 2 * pad);
    p += 2 * pad;
    *p = '\0';
    return (size_t)(p - out);
}

int abi_is_magic_value(const char *result, size_t len)
{
    if (len >= 2 && result[0] == '0' && (result[1] == 'x' || result[1] == 'X')) {
        result += 2;
        len -= 2;
    }
    if (len != 64)
        return 0;
    uint8_t word[32];
    if (hex_decode(result, len, word, sizeof word) != 0)
        return 0;
    static const uint8_t magic[4] = {0x16, 0x26, 0xba, 0x7e};
    if (memcmp(word, magic, 4) != 0)
        return 0;
    for (int i = 4; i < 32; i++)
        if (word[i])
            return 0;
    return 1;
}
