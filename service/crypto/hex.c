/* Hexadecimal encoding and strict decoding of byte strings. */
#include "hex.h"

int hex_digit_value(char c)
{
    /* Explicit ranges rather than isxdigit: no locale may widen what counts as a digit. */
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int hex_decode(const char *s, size_t len, uint8_t *out, size_t out_len)
{
    if (out_len > ((size_t)-1) / 2 || len != 2 * out_len) {
        return -1;
    }
    /* Validate everything first so a failed decode leaves out untouched. */
    for (size_t i = 0; i < len; i++) {
        if (hex_digit_value(s[i]) < 0) {
            return -1;
        }
    }
    for (size_t i = 0; i < out_len; i++) {
        out[i] = (uint8_t)(hex_digit_value(s[2 * i]) << 4 | hex_digit_value(s[2 * i + 1]));
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
