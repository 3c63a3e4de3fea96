/* eip1271: contract-wallet signatures (EIP-1271) checked by eth_call of isValidSignature on the
 * wallet, over JSON-RPC (httpc), on the loop: the address's code asked first (eth_getCode) and
 * remembered, one call in flight per (address, signature), refusals remembered briefly, a bound
 * on checks in flight and a rate cap on checks of addresses not known to hold code. */
#ifndef ENTITYD_EIP1271_H
#define ENTITYD_EIP1271_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/buf.h"

typedef struct eip1271 eip1271;

/* Candidate message hashes one check may try (one JSON-RPC batch). */
#define EIP1271_MAX_HASHES 4

enum eip1271_outcome {
    EIP1271_VALID = 0,   /* the wallet answered the magic value for one hash */
    EIP1271_INVALID,     /* another answer, or a revert, for every hash (or remembered so) */
    EIP1271_UNAVAILABLE, /* the RPC failed or did not answer within the timeout */
    EIP1271_BUSY,        /* too many checks in flight */
    EIP1271_CAPPED,      /* the address is not known to hold code and the rate cap is spent */
};

typedef struct eip1271_waiter eip1271_waiter;
/* outcome: enum eip1271_outcome; which: with EIP1271_VALID, the index of the hash accepted. */
typedef void (*eip1271_cb)(eip1271_waiter *w, int outcome, int which);

/* Owned by the caller (e.g. in its request's memory) until cb has run. */
struct eip1271_waiter {
    eip1271_waiter *next;
    eip1271_cb cb;
    int outcome, which;  /* eip1271's, while an answer known at once waits for the next turn */
    int64_t retry_after; /* with EIP1271_CAPPED: seconds until the cap has room again (>= 1) */
};

typedef struct eip1271_limits {
    int64_t timeout_ms;       /* deadline of one JSON-RPC request */
    int64_t max_inflight;     /* checks in flight at once (waiting on the code lookup or a call) */
    int64_t code_ttl_seconds; /* how long an address's code (or its absence) is remembered */
    int64_t max_per_second;   /* checks of addresses not known to hold code, per second */
} eip1271_limits;

/* A checker against the JSON-RPC endpoint url (copied; never logged with its credentials).
 * Returns 0, or -1 with err set. */
int eip1271_new(eip1271 **out, uv_loop_t *loop, const char *url, const eip1271_limits *lim,
                char *err, size_t err_len);
/* Fails the checks in flight (EIP1271_UNAVAILABLE), answers those waiting for the next turn,
 * and closes the handles. */
void eip1271_close(eip1271 *e);
void eip1271_free(eip1271 *e);

/* Checks sig (sig_len bytes) for the wallet addr against the n hashes (1..EIP1271_MAX_HASHES,
 * copied). key identifies (addr, sig): waiters with the same key share one call. An address
 * without code is refused (EIP1271_INVALID) without any eth_call. w->cb runs exactly once,
 * never before this returns (an answer known at once, a remembered refusal, busy or capped,
 * comes on the next loop turn). */
void eip1271_check(eip1271 *e, const uint8_t key[32], const uint8_t addr[20], const uint8_t *sig,
                   size_t sig_len, const uint8_t (*hashes)[32], int n, eip1271_waiter *w);

/* The identity of (addr, sig) for eip1271_check, for the candidate hashes of `round` (the
 * caller's epoch: the hashes change with it): keccak256(addr || sig || round). */
void eip1271_key(const uint8_t addr[20], const uint8_t *sig, size_t sig_len, int64_t round,
                 uint8_t out[32]);

#endif
