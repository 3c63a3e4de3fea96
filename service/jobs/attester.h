/* attester: the service's attestation signer (CONTRACT §10): its key, the EIP-712 domain, the
 * schema, the cache of signed attestations, and signing on the threadpool. */
#ifndef ENTITYD_ATTESTER_H
#define ENTITYD_ATTESTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/arena.h"
#include "core/config.h"

typedef struct attester attester;

/* Builds the attester from cfg before the loop runs: the key from ATTESTATION_KEY_FILE, or with
 * --dev and no file a fixed, public key (*dev_key set true). *out is NULL when attestations are
 * off (no key file, not --dev). Returns 0, or -1 with a sentence naming the problem in err. */
int attester_new(attester **out, const config *cfg, bool *dev_key, char *err, size_t err_len);
/* Wipes the key and frees everything; NULL is fine. No signing may be in flight. */
void attester_free(attester *at);

/* The body of GET /api/attestations/config, built once. */
const char *attester_config_json(const attester *at, size_t *len);
/* The signer's EIP-55 address. */
const char *attester_address(const attester *at);

/* One level reached to attest. The caller fills the inputs (bytes owned by the caller until
 * done runs); attester_render sets json. */
typedef struct attest_item {
    const char *level_id, *level_name_json; /* the name as stored: a JSON string */
    size_t level_id_len, level_name_json_len;
    int64_t reached_at_ms;
    const char *json; /* the rendered attestation, in the pool */
    size_t json_len;
    char *key; /* its cache key, in the pool */
    size_t key_len;
} attest_item;

/* Renders every item's attestation for member `recipient` (lowercase address) of the entity:
 * from the cache where it holds one, the rest signed on the threadpool. Memory comes from pool.
 * Returns 1 when every item was answered at once (done is not called), 0 when done(ctx, 0)
 * will run on the loop once they are, -1 (nothing pending) when memory or the pool failed. */
int attester_render(attester *at, uv_loop_t *loop, arena *pool, const char *entity_id,
                    const char *entity_name, size_t entity_name_len, const char *recipient,
                    attest_item *items, size_t n, void (*done)(void *ctx, int status), void *ctx);

#endif
