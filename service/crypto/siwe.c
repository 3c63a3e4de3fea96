/* The Sign-In with Ethereum (EIP-4361) message of CONTRACT section 11, for one address. */
#include "crypto/siwe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/isotime.h"
#include "crypto/address.h"
#include "crypto/keccak.h"
#include "crypto/signin.h"

size_t siwe_message_cap(const siwe_params *p)
{
    return 2 * strlen(p->domain) + strlen(p->uri) + SIWE_MESSAGE_EXTRA;
}

size_t siwe_head(const siwe_params *p, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s wants you to sign in with your Ethereum account:\n", p->domain);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* From "\n\nSign in to" to the Expiration Time, with the given nonce and times. */
static size_t tail_with(const siwe_params *p, const char *nonce, int64_t issued_ms,
                        int64_t expires_ms, char *buf, size_t cap)
{
    char issued[ISOTIME_STRING_SIZE], expires[ISOTIME_STRING_SIZE];

    isotime_format(issued_ms, issued);
    isotime_format(expires_ms, expires);
    int n = snprintf(buf, cap,
                     "\n"
                     "\n"
                     "Sign in to %s. It costs no gas.\n"
                     "\n"
                     "URI: %s\n"
                     "Version: 1\n"
                     "Chain ID: %" PRId64 "\n"
                     "Nonce: %s\n"
                     "Issued At: %s\n"
                     "Expiration Time: %s",
                     p->domain, p->uri, p->chain_id, nonce, issued, expires);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

size_t siwe_tail(const siwe_params *p, int64_t epoch, char *buf, size_t cap)
{
    char nonce[SIGNIN_NONCE_SIZE];

    signin_nonce(p->secret, p->secret_len, epoch, nonce);
    return tail_with(
        p, nonce, signin_epoch_start_ms(epoch, p->epoch_seconds),
        signin_epoch_start_ms(epoch < INT64_MAX - 2 ? epoch + 2 : epoch, p->epoch_seconds), buf,
        cap);
}

void siwe_hash_parts(const char *head, size_t head_len, const uint8_t addr[20], const char *tail,
                     size_t tail_len, uint8_t out[32])
{
    static const char prefix[] = "\x19"
                                 "Ethereum Signed Message:\n";
    char address[ADDRESS_STRING_SIZE], digits[24];
    size_t len = head_len + (ADDRESS_STRING_SIZE - 1) + tail_len;
    int n = snprintf(digits, sizeof digits, "%zu", len);
    struct keccak256_ctx k;

    address_format_checksum(addr, address);
    keccak256_init(&k);
    keccak256_update(&k, prefix, sizeof prefix - 1);
    keccak256_update(&k, digits, (size_t)n);
    keccak256_update(&k, head, head_len);
    keccak256_update(&k, address, ADDRESS_STRING_SIZE - 1);
    keccak256_update(&k, tail, tail_len);
    keccak256_final(&k, out);
}

size_t siwe_message(const siwe_params *p, const uint8_t addr[20], int64_t epoch, char *buf,
                    size_t cap)
{
    size_t head = siwe_head(p, buf, cap);
    if (!head || cap - head < ADDRESS_STRING_SIZE)
        return 0;
    address_format_checksum(addr, buf + head);
    size_t at = head + ADDRESS_STRING_SIZE - 1;
    size_t tail = siwe_tail(p, epoch, buf + at, cap - at);
    return tail ? at + tail : 0;
}

int siwe_hash(const siwe_params *p, const uint8_t addr[20], int64_t epoch, uint8_t out[32])
{
    char stackbuf[1024];
    size_t cap = siwe_message_cap(p);
    char *buf = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
    if (!buf)
        return -1;
    size_t head = siwe_head(p, buf, cap);
    size_t tail = head ? siwe_tail(p, epoch, buf + head, cap - head) : 0;
    if (tail)
        siwe_hash_parts(buf, head, addr, buf + head, tail, out);
    if (buf != stackbuf)
        free(buf);
    return tail ? 0 : -1;
}

size_t siwe_message_nonce(const siwe_params *p, const uint8_t addr[20], const char *nonce,
                          int64_t issued_ms, int64_t expires_ms, char *buf, size_t cap)
{
    if (strlen(nonce) > SIWE_NONCE_MAX)
        return 0;
    size_t head = siwe_head(p, buf, cap);
    if (!head || cap - head < ADDRESS_STRING_SIZE)
        return 0;
    address_format_checksum(addr, buf + head);
    size_t at = head + ADDRESS_STRING_SIZE - 1;
    size_t tail = tail_with(p, nonce, issued_ms, expires_ms, buf + at, cap - at);
    return tail ? at + tail : 0;
}
