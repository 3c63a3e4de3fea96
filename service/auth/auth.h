/* auth: wallet sign-in: the epoch's message, signature checks on the threadpool, revocation. */
#ifndef ENTITYD_AUTH_H
#define ENTITYD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/request.h"
#include "redis/store.h"

struct app;
typedef struct auth auth;

typedef void (*auth_next)(request *req);

typedef struct auth_stats {
    uint64_t ok, missing, malformed, mismatch, expired, revoked, cache_hits, queued;
    uint64_t unavailable;    /* contract-wallet checks the RPC could not answer (503) */
    uint64_t siwe, contract; /* new signatures verified over a SIWE message, by a contract */
    int64_t queue_depth;     /* checks on the threadpool right now */
} auth_stats;

/* The current epoch's message, for GET /api/auth/message. */
typedef struct auth_message {
    const char *text;
    size_t len;
    int64_t epoch;
    int64_t issued_at_ms, expires_at_ms, renew_after_ms;
} auth_message;

/* Creates the process's verifier (one secp256k1 context). Returns 0 or -1 with err set. */
int auth_new(auth **out, struct app *a, char *err, size_t err_len);
void auth_free(auth *au);

/* What a route asks of the caller before its handler runs. */
enum auth_mode {
    AUTH_NONE = 0, /* no sign-in */
    AUTH_REQUIRED, /* address and signature required, and they must match */
    AUTH_OPTIONAL, /* address required; a signature, when given, is verified all the same */
    AUTH_RECOVER,  /* signature required; address optional: the recovered address is the caller */
};

/* Flags of auth_authenticate. */
/* The handler sends its first read with request_read_flags (http/request.h), so the revocation
 * check may ride just ahead of it (one round trip) instead of coming first; for routes that
 * change nothing. */
#define AUTH_DEFERRED_REVOCATION 1
/* A write: the caller's write budget (auth/limits.h) is charged before next runs; over it the
 * request is answered 429. Sent with the revocation check when the signature is cached. */
#define AUTH_WRITE_BUDGET 2
/* Only the query's signature signs in (the route acts on that signature): a session token in
 * the Authorization header or the cookie is not looked at. */
#define AUTH_SIGNATURE_ONLY 4
/* An entity API key (CONTRACT section 13) of either scope may call the route; of scope admin
 * only. Without either, a key is refused 403. */
#define AUTH_KEY_AWARD 8
#define AUTH_KEY_ADMIN 16

/* Runs the route's sign-in step (enum auth_mode), then next(req) with req->caller set; or
 * answers 400/401/429/503/504 itself. flags: AUTH_* above. A session token (CONTRACT section
 * 13: `Authorization: Bearer`, else the entityd_session cookie) signs in in place of the
 * query's address and signature, with the same roles, budget and answers; the query's
 * signature is then not looked at, and an address in the query must be the token's (else
 * 400). A cookie that is no live session is ignored where signing is optional (and cleared
 * by the answer), 401 elsewhere. A Bearer value that is an entity API key (`ek_`) signs in
 * as the key's creator on the routes flagged AUTH_KEY_* for its scope and its own entity only
 * (else 403, before anything is spent), with a write budget of its own; req->api_key_id names
 * it. req->credential says which credential was used. */
void auth_authenticate(request *req, int mode, int flags, auth_next next);

/* auth_authenticate with the address and signature given (a body's, not the query's; NULL or
 * empty: absent). Both must stay valid until next has run (the request's memory). */
void auth_authenticate_with(request *req, int mode, int flags, const char *address, size_t alen,
                            const char *signature, size_t slen, auth_next next);
/* Whether the request's signature was accepted by its wallet's contract (EIP-1271). */
bool auth_request_by_contract(const request *req);

/* The outcome of auth_verify_hash. */
enum auth_verify_outcome {
    AUTH_VERIFY_KEY = 0,     /* the address's key signed the hash */
    AUTH_VERIFY_CONTRACT,    /* the address's contract accepted the signature (EIP-1271) */
    AUTH_VERIFY_BAD,         /* neither: a wrong or malformed signature */
    AUTH_VERIFY_UNAVAILABLE, /* the contract could not be asked (RPC down, busy, capped) */
};
typedef void (*auth_verified)(request *req, int outcome);
/* Checks that signature (text, kept valid by the caller until done runs) signs the EIP-191
 * hash for addr: recovery on the threadpool, then, with ETH_RPC_URL, the address's contract.
 * done runs exactly once (maybe before this returns), unless this answered the request itself
 * (500: no memory), in which case done never runs. */
void auth_verify_hash(request *req, const uint8_t addr[20], const char *signature, size_t slen,
                      const uint8_t hash[32], auth_verified done);

/* A challenge's SIWE message (crypto/siwe.h: siwe_message_nonce) with this deployment's
 * domain, URI and chain id, into buf (cap: auth_siwe_message_cap). Returns its length, or 0. */
size_t auth_challenge_message(const auth *au, const uint8_t addr[20], const char *nonce,
                              int64_t issued_ms, int64_t expires_ms, char *buf, size_t cap);

/* The message callers sign now. Valid until the next call. */
void auth_current_message(auth *au, auth_message *out);
/* The SIWE (EIP-4361) message of the current epoch for addr, written to text (cap bytes, at least
 * auth_siwe_message_cap); out->text is text. Returns 0, or -1 when cap is too small. */
int auth_siwe_message(auth *au, const uint8_t addr[20], char *text, size_t cap, auth_message *out);
size_t auth_siwe_message_cap(const auth *au);
/* At shutdown, while the loop runs: contract-wallet checks in flight fail (503), the RPC
 * client's handles close. */
void auth_close(auth *au);

/* Expiry (Unix seconds) of a signature over the message of `epoch`. */
int64_t auth_signature_expiry(const auth *au, int64_t epoch);
/* The epoch of the message the request's signature was verified against (after auth). */
int64_t auth_request_epoch(const request *req);
/* The r||s id of the request's verified signature (after auth), for revocation. */
const char *auth_request_revocation_id(const request *req);

const auth_stats *auth_get_stats(const auth *au);

/* For a read handler whose answer needs no read of its own (a page kept in the process): the
 * revocation check alone (through the read cache), then next(req), which answers; a revoked
 * or unchecked signature's status then overrides that answer. next may run before this
 * returns. */
void auth_check_revocation(request *req, auth_next next);

/* Parses the address query parameter s (EIP-55 checked when of mixed case) into out; when it is
 * no address, answers 400 naming the field "address" and returns false. */
bool auth_parse_address(request *req, const char *s, size_t len, uint8_t out[20]);

/* True when the lowercase address is in PLATFORM_ADMINS. */
bool auth_is_platform_admin(const auth *au, const char *caller);

#endif
