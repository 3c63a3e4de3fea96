/* Ethereum addresses: parsing with EIP-55 checksum rules, formatting, derivation from a key. */
#include "crypto/address.h"

#include <string.h>

#include "crypto/hex.h"
#include "crypto/keccak.h"

/* EIP-55: hex digit i of the lowercase spelling is uppercased when nibble i of
 * keccak256(lowercase spelling) is 8 or more. lower40 holds the 40 digits, no prefix. */
static void checksum_digits(const char lower40[40], char out40[40])
{
    uint8_t h[KECCAK256_DIGEST_SIZE];

    keccak256(lower40, 40, h);
    for (size_t i = 0; i < 40; i++) {
        char c = lower40[i];
        unsigned nibble = (i % 2 == 0) ? h[i / 2] >> 4 : h[i / 2] & 0x0f;
        out40[i] = (c >= 'a' && c <= 'f' && nibble >= 8) ? (char)(c - 'a' + 'A') : c;
    }
}

int address_parse(const char *s, size_t len, uint8_t out[ADDRESS_SIZE])
{
    uint8_t bytes[ADDRESS_SIZE];
    int has_lower = 0, has_upper = 0;

    if (len != 42 || s[0] != '0' || s[1] != 'x' ||
        hex_decode(s + 2, 40, bytes, ADDRESS_SIZE) != 0) {
        return ADDRESS_EFORMAT;
    }
    for (size_t i = 2; i < 42; i++) {
        has_lower |= s[i] >= 'a' && s[i] <= 'f';
        has_upper |= s[i] >= 'A' && s[i] <= 'F';
    }
    if (has_lower && has_upper) {
        char lower[ADDRESS_STRING_SIZE], expect[40];

        address_format_lower(bytes, lower);
        checksum_digits(lower + 2, expect);
        if (memcmp(expect, s + 2, 40) != 0) {
            return ADDRESS_ECHECKSUM;
        }
    }
    memcpy(out, bytes, ADDRESS_SIZE);
    return ADDRESS_OK;
}

void address_format_lower(const uint8_t a[ADDRESS_SIZE], char out[ADDRESS_STRING_SIZE])
{
    out[0] = '0';
    out[1] = 'x';
    hex_encode(a, ADDRESS_SIZE, out + 2);
}

void address_format_checksum(const uint8_t a[ADDRESS_SIZE], char out[ADDRESS_STRING_SIZE])
{
    char lower[ADDRESS_STRING_SIZE];

    address_format_lower(a, lower);
    out[0] = '0';
    out[1] = 'x';
    checksum_digits(lower + 2, out + 2);
    out[42] = '\0';
}

void address_from_pubkey(const uint8_t pub_uncompressed[65], uint8_t out[ADDRESS_SIZE])
{
    uint8_t h[KECCAK256_DIGEST_SIZE];

    keccak256(pub_uncompressed + 1, 64, h);
    memcpy(out, h + KECCAK256_DIGEST_SIZE - ADDRESS_SIZE, ADDRESS_SIZE);
}
