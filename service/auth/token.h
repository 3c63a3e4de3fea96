/* token: session tokens (CONTRACT section 13): `es_` + the session's address (40 lowercase hex
 * digits) + 128 random bits (32 lowercase hex digits). The address rides in the token so the
 * caller is known at once: the session's check then goes in the same round trip as what the
 * signature path already sends (a read's data, a write's budget), never one more (see
 * docs/DECISIONS.md). Redis keeps only the token's hash; the session's public id is a prefix
 * of that hash, from which no token can be found. */
#ifndef ENTITYD_TOKEN_H
#define ENTITYD_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_SESSION_PREFIX "es_"
#define TOKEN_RANDOM_BYTES   16
#define TOKEN_SESSION_LEN    (3 + 40 + 2 * TOKEN_RANDOM_BYTES)
#define TOKEN_HASH_HEX_LEN   64
#define TOKEN_ID_LEN         24 /* hex digits of the hash: 96 bits */

typedef struct token {
    uint8_t addr[20];
    char address[43];                  /* "0x" + 40 lowercase hex digits */
    char hash[TOKEN_HASH_HEX_LEN + 1]; /* keccak256 of the whole token, lowercase hex */
    char id[TOKEN_ID_LEN + 1];         /* the hash's first TOKEN_ID_LEN digits */
} token;

/* A new session token for addr into out (TOKEN_SESSION_LEN + NUL), its hash and id into t.
 * Returns 0, or -1 when the system has no randomness to give. */
int token_new_session(const uint8_t addr[20], char out[TOKEN_SESSION_LEN + 1], token *t);

/* Parses a session token of len bytes: true, with t filled, when it has the form above. Says
 * nothing of whether it is live: that is Redis's to tell. */
bool token_parse_session(const char *s, size_t len, token *t);

/* Entity API keys (CONTRACT section 13): `ek_` + the entity's id's 32 hex digits (its uuid
 * without the dashes) + 128 random bits (32 lowercase hex digits). The entity rides in the key
 * as the address rides in a session token: its check goes to the entity's own slot, in the
 * round trip the request makes anyway, and a key names no other entity. */
#define TOKEN_KEY_PREFIX "ek_"
#define TOKEN_KEY_LEN    (3 + 32 + 2 * TOKEN_RANDOM_BYTES)

typedef struct api_key {
    char entity[39];                   /* "c-" + the uuid, dashes where they belong */
    char hash[TOKEN_HASH_HEX_LEN + 1]; /* keccak256 of the whole key, lowercase hex */
    char id[TOKEN_ID_LEN + 1];         /* the hash's first TOKEN_ID_LEN digits: the key's id */
} api_key;

/* A new key for a validated entity id ("c-<uuid>", lowercase) into out (TOKEN_KEY_LEN + NUL),
 * its hash and id into k. Returns 0, or -1 when the id is not of that form or the system has
 * no randomness to give. */
int token_new_key(const char *entity_id, char out[TOKEN_KEY_LEN + 1], api_key *k);

/* Parses an API key of len bytes: true, with k filled, when it has the form above. */
bool token_parse_key(const char *s, size_t len, api_key *k);

/* Constant-time equality of two hashes of TOKEN_HASH_HEX_LEN digits. */
bool token_hash_equal(const char *a, const char *b);

#endif
