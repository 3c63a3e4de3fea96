/* The sign-in message callers sign (CONTRACT section 2): epochs, nonces, message text. */
#include "crypto/signin.h"

#include <inttypes.h>
#include <stdio.h>

#include <nettle/hmac.h>

#include "crypto/hex.h"
#include "core/isotime.h"

int64_t signin_epoch(int64_t unix_seconds, int64_t epoch_seconds)
{
    if (epoch_seconds <= 0) {
        return 0;
    }
    int64_t q = unix_seconds / epoch_seconds;

    /* C division truncates toward zero; epochs must keep counting down before 1970. */
    return (unix_seconds % epoch_seconds != 0 && unix_seconds < 0) ? q - 1 : q;
}

void signin_nonce(const uint8_t *secret, size_t secret_len, int64_t epoch,
                  char out[SIGNIN_NONCE_SIZE])
{
    struct hmac_sha256_ctx ctx;
    char label[32];
    uint8_t mac[16];
    int n = snprintf(label, sizeof(label), "epoch:%" PRId64, epoch);

    hmac_sha256_set_key(&ctx, secret_len, secret);
    hmac_sha256_update(&ctx, (size_t)n, (const uint8_t *)label);
    /* nettle truncates the tag to the requested length. */
    hmac_sha256_digest(&ctx, sizeof(mac), mac);
    hex_encode(mac, sizeof(mac), out);
}

/* Saturated past the years isotime can print: a huge epoch from a misconfiguration must not
 * overflow (undefined behaviour). */
int64_t signin_epoch_start_ms(int64_t epoch, int64_t epoch_seconds)
{
    const int64_t max_s = ISOTIME_MAX_MS / 1000 + 1, min_s = ISOTIME_MIN_MS / 1000 - 1;

    if (epoch == 0 || epoch_seconds <= 0) {
        return 0;
    }
    if (epoch_seconds > max_s || epoch > max_s / epoch_seconds) {
        return epoch > 0 ? ISOTIME_MAX_MS : ISOTIME_MIN_MS;
    }
    if (epoch < min_s / epoch_seconds) {
        return ISOTIME_MIN_MS;
    }
    return epoch * epoch_seconds * 1000;
}

size_t signin_message(const char *domain, const uint8_t *secret, size_t secret_len,
                      int64_t epoch_seconds, int64_t epoch, char *buf, size_t cap)
{
    char nonce[SIGNIN_NONCE_SIZE], issued[ISOTIME_STRING_SIZE], expires[ISOTIME_STRING_SIZE];

    signin_nonce(secret, secret_len, epoch, nonce);
    isotime_format(signin_epoch_start_ms(epoch, epoch_seconds), issued);
    isotime_format(signin_epoch_start_ms(epoch < INT64_MAX - 2 ? epoch + 2 : epoch, epoch_seconds),
                   expires);
    int n = snprintf(buf, cap,
                     "Sign in to %s\n"
                     "\n"
                     "Sign this message to prove you own this wallet. It costs no gas.\n"
                     "\n"
                     "Epoch: %" PRId64 "\n"
                     "Nonce: %s\n"
                     "Issued At: %s\n"
                     "Expiration Time: %s",
                     domain, epoch, nonce, issued, expires);
    if (n < 0 || (size_t)n >= cap) {
        return 0;
    }
    return (size_t)n;
}
