/* keys: every Redis key shape entityd uses (documented in keys.h). */
#include "keys.h"

#include <stdio.h>

size_t keys_revoked(char out[KEYS_REVOKED_SIZE], const char *revocation_id)
{
    int n = snprintf(out, KEYS_REVOKED_SIZE, "auth:revoked:%s", revocation_id);
    return n < 0 ? 0 : (size_t)n;
}
