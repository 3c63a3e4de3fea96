/* The sign-in message callers sign (CONTRACT section 2): epochs, nonces, message text. */
#ifndef ENTITYD_SIGNIN_H
#define ENTITYD_SIGNIN_H

#include <stddef.h>
#include <stdint.h>

/* 32 lowercase hex digits + NUL */
#define SIGNIN_NONCE_SIZE 33
/* Bytes beyond strlen(domain) that always suffice for signin_message's buffer, NUL included. */
#define SIGNIN_MESSAGE_EXTRA 256

/* floor(unix_seconds / epoch_seconds), rounding down for negative times too. epoch_seconds must
 * be positive; 0 is returned otherwise. */
int64_t signin_epoch(int64_t unix_seconds, int64_t epoch_seconds);

/* Start of epoch in Unix milliseconds, saturated at the years ISO time can print. */
int64_t signin_epoch_start_ms(int64_t epoch, int64_t epoch_seconds);

/* Writes the epoch's nonce to out: the first 16 bytes of HMAC-SHA256(secret, "epoch:" + decimal
 * epoch) as 32 lowercase hex digits and a NUL. */
void signin_nonce(const uint8_t *secret, size_t secret_len, int64_t epoch,
                  char out[SIGNIN_NONCE_SIZE]);

/* Writes the sign-in message of epoch (lines joined by "\n", no trailing newline) and a NUL to
 * buf, a caller-owned buffer of cap bytes. Issued At is the start of the epoch, Expiration Time
 * the end of the next one. Returns the message length without the NUL, or 0 when cap is too
 * small (buf then holds no usable message); strlen(domain) + SIGNIN_MESSAGE_EXTRA is enough. */
size_t signin_message(const char *domain, const uint8_t *secret, size_t secret_len,
                      int64_t epoch_seconds, int64_t epoch, char *buf, size_t cap);

#endif
