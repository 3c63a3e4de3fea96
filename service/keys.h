/* keys: every Redis key shape entityd uses, and nothing else builds key names.
 *
 *   auth:revoked:<r||s hex>   string "1", expires when the signature would have (EXAT)
 *
 * Keys of one entity will share the hash tag {c-<uuid>} so that multi-key scripts stay within
 * one Redis Cluster slot. */
#ifndef ENTITYD_KEYS_H
#define ENTITYD_KEYS_H

#include <stddef.h>

/* "auth:revoked:" + 128 hex + NUL */
#define KEYS_REVOKED_SIZE (13 + 128 + 1)

/* Writes the revocation key of a signature's r||s id; returns its length. */
size_t keys_revoked(char out[KEYS_REVOKED_SIZE], const char *revocation_id);

#endif
