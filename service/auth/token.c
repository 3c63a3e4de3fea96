/* token: see token.h. */
#include "auth/token.h"

#include <string.h>
#include <sys/random.h>

#include "crypto/hex.h"
#include "crypto/keccak.h"

/* keccak256 of s into hash (hex) and its first TOKEN_ID_LEN digits into id. */
static void token_digest(const char *s, size_t len, char hash[TOKEN_HASH_HEX_LEN + 1],
                         char id[TOKEN_ID_LEN + 1])
{
    uint8_t h[KECCAK256_DIGEST_SIZE];
    keccak256(s, len, h);
    hex_encode(h, sizeof h, hash);
    hash[TOKEN_HASH_HEX_LEN] = '\0';
    memcpy(id, hash, TOKEN_ID_LEN);
    id[TOKEN_ID_LEN] = '\0';
}

static void token_hash(const char *s, size_t len, token *t)
{
    token_digest(s, len, t->hash, t->id);
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

/* Where the uuid "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" has its dashes. */
static bool token_dash_at(size_t i)
{
    return i == 8 || i == 13 || i == 18 || i == 23;
}

int token_new_key(const char *entity_id, char out[TOKEN_KEY_LEN + 1], api_key *k)
{
    if (strlen(entity_id) != 38 || memcmp(entity_id, "c-", 2))
        return -1;
    const char *u = entity_id + 2;
    char hex[32];
    size_t n = 0;
    for (size_t i = 0; i < 36; i++) {
        if (token_dash_at(i)) {
            if (u[i] != '-')
                return -1;
        } else {
            hex[n++] = u[i];
        }
    }
    if (!token_lower_hex(hex, 32))
        return -1;
    uint8_t rnd[TOKEN_RANDOM_BYTES];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return -1;
    memcpy(out, TOKEN_KEY_PREFIX, 3);
    memcpy(out + 3, hex, 32);
    hex_encode(rnd, sizeof rnd, out + 35);
    out[TOKEN_KEY_LEN] = '\0';
    memcpy(k->entity, entity_id, 38);
    k->entity[38] = '\0';
    token_digest(out, TOKEN_KEY_LEN, k->hash, k->id);
    return 0;
}

bool token_parse_key(const char *s, size_t len, api_key *k)
{
    if (len != TOKEN_KEY_LEN || memcmp(s, TOKEN_KEY_PREFIX, 3) || !token_lower_hex(s + 3, len - 3))
        return false;
    k->entity[0] = 'c';
    k->entity[1] = '-';
    for (size_t i = 0, n = 0; i < 36; i++)
        k->entity[2 + i] = token_dash_at(i) ? '-' : s[3 + n++];
    k->entity[38] = '\0';
    token_digest(s, len, k->hash, k->id);
    return true;
}
