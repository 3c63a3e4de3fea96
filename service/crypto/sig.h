/* Ethereum signatures: parsing (65-byte and EIP-2098), EIP-191 hashing, recovery, signing. */
#ifndef ENTITYD_SIG_H
#define ENTITYD_SIG_H

#include <stddef.h>
#include <stdint.h>

#include <secp256k1.h>

/* "0x" + 130 hex + NUL */
#define SIG_STRING_SIZE 133
/* "0x" + 128 hex + NUL */
#define SIG_COMPACT_STRING_SIZE 131
/* 128 hex + NUL */
#define SIG_REVOCATION_ID_SIZE 129

/* A parsed signature: big-endian r and s, recovery id 0 or 1 (v - 27). */
typedef struct {
    uint8_t r[32], s[32];
    int recid;
} eth_sig;

enum sig_err {
    SIG_OK = 0,
    SIG_EHEX,    /* a character is not a hex digit */
    SIG_ELENGTH, /* neither 130 nor 128 hex digits */
    SIG_EV,      /* v not in {0, 1, 27, 28} */
    SIG_ERANGE,  /* r or s is 0 or not below the group order n */
    SIG_EHIGHS,  /* s > n/2, forbidden by EIP-2 */
};

/* Parses the len characters of s (need not be NUL-terminated, "0x" optional): 130 hex digits are
 * r || s || v with v in {0, 1, 27, 28}, 128 are the EIP-2098 compact form (top bit of s is the
 * y parity). Returns SIG_OK or one of enum sig_err; out is written only on success. */
int sig_parse(const char *s, size_t len, eth_sig *out);

/* One human sentence describing err (a static string, never NULL, also for unknown codes). */
const char *sig_strerror(int err);

/* EIP-191 personal message hash: keccak256("\x19Ethereum Signed Message:\n" + decimal byte
 * length + msg) into out. */
void sig_personal_hash(const void *msg, size_t len, uint8_t out[32]);

/* Recovers the signer's address of hash into addr_out. ctx is the caller's context (any flags;
 * SECP256K1_CONTEXT_NONE suffices). Returns 0, or -1 when no key matches (including high-s or a
 * recid other than 0/1); addr_out is written only on success. Safe to call concurrently with
 * one ctx, which libsecp256k1 only reads here. */
int sig_recover(const secp256k1_context *ctx, const eth_sig *sig, const uint8_t hash[32],
                uint8_t addr_out[20]);

/* Signs hash with seckey (RFC 6979 nonce, so deterministic and low-s). Returns 0, or -1 when
 * seckey is not a valid secret key; out is written only on success. */
int sig_sign(const secp256k1_context *ctx, const uint8_t seckey[32], const uint8_t hash[32],
             eth_sig *out);

/* Writes "0x" + r || s || v in lowercase hex with v 27/28, NUL-terminated. */
void sig_format(const eth_sig *sig, char out[SIG_STRING_SIZE]);

/* Writes the EIP-2098 compact form "0x" + r || (s with the y parity in its top bit), NUL
 * terminated. */
void sig_format_compact(const eth_sig *sig, char out[SIG_COMPACT_STRING_SIZE]);

/* Writes lowercase hex of r || s, NUL-terminated: one id for every spelling of a signature
 * (v 0/1, v 27/28, compact). */
void sig_revocation_id(const eth_sig *sig, char out[SIG_REVOCATION_ID_SIZE]);

#endif
