/* Solidity ABI encoding of the one call the service makes: EIP-1271 isValidSignature. */
#ifndef ENTITYD_ABI_H
#define ENTITYD_ABI_H

#include <stddef.h>
#include <stdint.h>

/* isValidSignature(bytes32,bytes): its selector, and the magic value a valid answer returns. */
#define ABI_IS_VALID_SIGNATURE_SELECTOR 0x1626ba7eu

/* Characters of the "0x"-prefixed hex call data for a signature of sig_len bytes, NUL included. */
size_t abi_is_valid_signature_size(size_t sig_len);

/* Writes the call data of isValidSignature(hash, sig) as "0x" + lowercase hex + NUL to out:
 * selector, hash, the offset of the bytes (0x40), their length, the bytes right-padded with
 * zeros to a multiple of 32. Returns the length without the NUL, or 0 when cap (bytes of out)
 * is below abi_is_valid_signature_size(sig_len). */
size_t abi_is_valid_signature(const uint8_t hash[32], const uint8_t *sig, size_t sig_len, char *out,
                              size_t cap);

/* True when result (hex text of an eth_call's answer, "0x" optional) is the ABI encoding of the
 * bytes4 magic value 0x1626ba7e: the four bytes then 28 zero bytes. */
int abi_is_magic_value(const char *result, size_t len);

#endif
