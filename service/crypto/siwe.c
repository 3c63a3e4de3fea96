/* The Sign-In with Ethereum (EIP-4361) message of CONTRACT section 11, for one address. */
#include "crypto/siwe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/isotime.h"
#include "crypto/address.h"
#include "crypto/sig.h"
#include "crypto/signin.h"

size_t siwe_message_cap(const siwe_params *p)
{
    return 2 * strlen(p->domain) + strlen(p->uri) + SIWE_MESSAGE_EXTRA;
}

size_t siwe_message(const siwe_params *p, const uint8_t addr[20], int64_t epoch, char *buf,
                    size_t cap)
{
    char nonce[SIGNIN_NONCE_SIZE], issued[ISOTIME_STRING_SIZE], expires[ISOTIME_STRING_SIZE];
    char address[ADDRESS_STRING_SIZE];

    signin_nonce(p->secret, p->secret_len, epoch, nonce);
    isotime_format(signin_epoch_start_ms(epoch, p->epoch_seconds), issued);
    isotime_format(
        signin_epoch_start_ms(epoch < INT64_MAX - 2 ? epoch + 2 : epoch, p->epoch_seconds),
        expires);
    address_format_checksum(addr, address);
    int n = snprintf(buf, cap,
                     "%s wants you to sign in with your Ethereum account:\n"
                     "%s\n"
                     "\n"
                     "Sign in to %s. It costs no gas.\n"
                     "\n"
                     "URI: %s\n"
                     "Version: 1\n"
                     "Chain ID: %" PRId64 "\n"
                     "Nonce: %s\n"
                     "Issued At: %s\n"
                     "Expiration Time: %s",
                     p->domain, address, p->domain, p->uri, p->chain_id, nonce, issued, expires);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

int siwe_hash(const siwe_params *p, const uint8_t addr[20], int64_t epoch, uint8_t out[32])
{
    char stackbuf[1024];
    size_t cap = siwe_message_cap(p);
    char *buf = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
    if (!buf)
        return -1;
    size_t len = siwe_message(p, addr, epoch, buf, cap);
    if (len)
        sig_personal_hash(buf, len, out);
    if (buf != stackbuf)
        free(buf);
    return len ? 0 : -1;
}
