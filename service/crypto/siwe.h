/* The Sign-In with Ethereum (EIP-4361) message of CONTRACT section 11, for one address. */
#ifndef ENTITYD_SIWE_H
#define ENTITYD_SIWE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes beyond 2 * strlen(domain) + strlen(uri) that always suffice for siwe_message's buffer,
 * NUL included (and for siwe_head's and siwe_tail's). */
#define SIWE_MESSAGE_EXTRA 320

/* What a deployment puts into every message; borrowed, never copied. */
typedef struct siwe_params {
    const char *domain; /* AUTH_DOMAIN */
    const char *uri;    /* AUTH_URI */
    int64_t chain_id;   /* AUTH_CHAIN_ID */
    const uint8_t *secret;
    size_t secret_len;
    int64_t epoch_seconds;
} siwe_params;

/* The buffer size siwe_message (and siwe_head, siwe_tail) needs for p. */
size_t siwe_message_cap(const siwe_params *p);

/* The message is head + the address (EIP-55) + tail. siwe_head writes the part before the
 * address line ("{domain} wants you to sign in with your Ethereum account:\n"), the same for
 * every epoch; siwe_tail the part after it, for `epoch` (from "\n\nSign in to" to the
 * Expiration Time). Both write a NUL and return the length without it, or 0 when cap is too
 * small. */
size_t siwe_head(const siwe_params *p, char *buf, size_t cap);
size_t siwe_tail(const siwe_params *p, int64_t epoch, char *buf, size_t cap);

/* The EIP-191 hash of head + EIP-55 address + tail into out, with no copy of the text: what
 * the threadpool runs per signature. Reads only its arguments: safe on any thread. */
void siwe_hash_parts(const char *head, size_t head_len, const uint8_t addr[20], const char *tail,
                     size_t tail_len, uint8_t out[32]);

/* Writes the SIWE message of `epoch` for addr (EIP-55 line; lines joined by "\n", no trailing
 * newline) and a NUL to buf, a caller-owned buffer of cap bytes. Nonce, Issued At and Expiration
 * Time are those of section 2's message of the same epoch. Returns the length without the NUL,
 * or 0 when cap is too small. Reads only its arguments: safe on any thread. */
size_t siwe_message(const siwe_params *p, const uint8_t addr[20], int64_t epoch, char *buf,
                    size_t cap);

/* The EIP-191 hash of siwe_message's text into out. Returns 0, or -1 when the message cannot
 * be built (allocation). */
int siwe_hash(const siwe_params *p, const uint8_t addr[20], int64_t epoch, uint8_t out[32]);

/* Longest nonce siwe_message_nonce takes (a challenge's: CONTRACT section 13). */
#define SIWE_NONCE_MAX 32

/* The SIWE message for addr with the given nonce (at most SIWE_NONCE_MAX characters, which
 * SIWE_MESSAGE_EXTRA leaves room for), Issued At and Expiration Time (Unix ms): a challenge's,
 * rebuilt from its stored record. Same lines as siwe_message otherwise. Returns the length
 * without the NUL, or 0 when cap is too small or the nonce too long. */
size_t siwe_message_nonce(const siwe_params *p, const uint8_t addr[20], const char *nonce,
                          int64_t issued_ms, int64_t expires_ms, char *buf, size_t cap);

#endif
