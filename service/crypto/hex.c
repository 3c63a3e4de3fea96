/* Hexadecimal encoding and strict decoding of byte strings. */
#include "crypto/hex.h"

/* Digit values by byte, 0xff for "not a hex digit". Explicit, rather than isxdigit: no locale
 * may widen what counts as a digit. A table because addresses and signatures are decoded on
 * every signed request. */
static const uint8_t digit_value[256] = {
    ['0'] = 0,  ['1'] = 1,  ['2'] = 2,  ['3'] = 3,  ['4'] = 4,  ['5'] = 5,  ['6'] = 6,  ['7'] = 7,
    ['8'] = 8,  ['9'] = 9,  ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14, ['f'] = 15,
    ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15,
};
static const uint8_t is_digit[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
};

int hex_digit_value(char c)
{
    unsigned char u = (unsigned char)c;
    return is_digit[u] ? digit_value[u] : -1;
}

int hex_decode(const char *s, size_t len, uint8_t *out, size_t out_len)
{
    if (out_len > ((size_t)-1) / 2 || len != 2 * out_len) {
        return -1;
    }
    /* Validate everything first so a failed decode leaves out untouched. */
    unsigned ok = 1;
    for (size_t i = 0; i < len; i++) {
        ok &= is_digit[(unsigned char)s[i]];
    }
    if (!ok) {
        return -1;
    }
    for (size_t i = 0; i < out_len; i++) {
        out[i] = (uint8_t)(digit_value[(unsigned char)s[2 * i]] << 4 |
                           digit_value[(unsigned char)s[2 * i + 1]]);
    }
    return 0;
}

void hex_encode(const uint8_t *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0x0f];
    }
    out[2 * len] = '\0';
}
