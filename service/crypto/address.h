/* Ethereum addresses: parsing with EIP-55 checksum rules, formatting, derivation from a key. */
#ifndef ENTITYD_ADDRESS_H
#define ENTITYD_ADDRESS_H

#include <stddef.h>
#include <stdint.h>

#define ADDRESS_SIZE 20
/* "0x" + 40 hex digits + NUL */
#define ADDRESS_STRING_SIZE 43

enum address_err {
    ADDRESS_OK = 0,
    ADDRESS_EFORMAT,   /* not "0x" followed by exactly 40 hex digits */
    ADDRESS_ECHECKSUM, /* mixed case that fails the EIP-55 checksum */
};

/* Parses the len characters of s (need not be NUL-terminated) into out. Requires "0x" and 40 hex
 * digits; all-lowercase or all-uppercase digits are accepted as is, mixed case must match
 * EIP-55. Returns ADDRESS_OK, ADDRESS_EFORMAT or ADDRESS_ECHECKSUM; out is written only on
 * success. */
int address_parse(const char *s, size_t len, uint8_t out[ADDRESS_SIZE]);

/* Writes "0x" + 40 lowercase hex digits + NUL to out. */
void address_format_lower(const uint8_t a[ADDRESS_SIZE], char out[ADDRESS_STRING_SIZE]);

/* Writes the EIP-55 mixed-case spelling ("0x" + 40 digits + NUL) to out. */
void address_format_checksum(const uint8_t a[ADDRESS_SIZE], char out[ADDRESS_STRING_SIZE]);

/* Derives the address of an uncompressed SEC1 public key (0x04 || X || Y): the last 20 bytes of
 * keccak256(X || Y). The leading 0x04 byte is not checked. */
void address_from_pubkey(const uint8_t pub_uncompressed[65], uint8_t out[ADDRESS_SIZE]);

#endif
