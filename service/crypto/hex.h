/* Hexadecimal encoding and strict decoding of byte strings. */
#ifndef ENTITYD_HEX_H
#define ENTITYD_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Decodes exactly out_len bytes from the len characters of s (no prefix, either case; s need not
 * be NUL-terminated). Returns 0, or -1 when len != 2 * out_len or a character is not a hex
 * digit; out is written only on success. */
int hex_decode(const char *s, size_t len, uint8_t *out, size_t out_len);

/* Writes 2 * len lowercase hex digits and a NUL to out, which must hold 2 * len + 1 bytes. */
void hex_encode(const uint8_t *in, size_t len, char *out);

/* Value of one hex digit, or -1 when c is not one. */
int hex_digit_value(char c);

#endif
