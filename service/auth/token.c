/* token: see token.h. */
#include "auth/token.h"

#include <string.h>
#include <sys/random.h>

#include "crypto/hex.h"
#include "crypto/keccak.h"

static void token_hash(const char *s, size_t len, token *t)
{
    uint8_t h[KECCAK256_DIGEST_SIZE];
    keccak256(s, len, h);
    hex_encode(h, sizeof h, t->hash);
    t->hash[TOKEN_HASH_HEX_LEN] = '\0';
    memcpy(t->id, t->hash, TOKEN_ID_LEN);
    t->id[TOKEN_ID_LEN] = '\0';
}

static bool token_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int token_new_session(const uint8_t addr[20], char out[TOKEN_SESSION_LEN + 1], token *t)
{
    uint8_t rnd[TOKEN_RANDOM_BYTES];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return -1;
    memcpy(out, TOKEN_SESSION_PREFIX, 3);
    hex_encode(addr, 20, out + 3);
    hex_encode(rnd, sizeof rnd, out + 43);
    out[TOKEN_SESSION_LEN] = '\0';
    memcpy(t->addr, addr, 20);
    t->address[0] = '0';
    t->address[1] = 'x';
    memcpy(t->address + 2, out + 3, 40);
    t->address[42] = '\0';
    token_hash(out, TOKEN_SESSION_LEN, t);
    return 0;
}

bool token_parse_session(const char *s, size_t len, token *t)
{
    if (len != TOKEN_SESSION_LEN || memcmp(s, TOKEN_SESSION_PREFIX, 3) ||
        !token_lower_hex(s + 3, len - 3))
        return false;
    if (hex_decode(s + 3, 40, t->addr, 20) != 0)
        return false;
    t->address[0] = '0';
    t->address[1] = 'x';
    memcpy(t->address + 2, s + 3, 40);
    t->address[42] = '\0';
    token_hash(s, len, t);
    return true;
}

bool token_hash_equal(const char *a, const char *b)
{
    unsigned char d = 0;
    for (size_t i = 0; i < TOKEN_HASH_HEX_LEN; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}
