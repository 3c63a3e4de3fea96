/* auth_int: what the files of auth/ share: the verifier, one request's sign-in state, and the
 * calls between the halves (messages, recovery and its join, contract wallets, revocation). */
#ifndef ENTITYD_AUTH_INT_H
#define ENTITYD_AUTH_INT_H

#include <secp256k1.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "auth/apikey.h"
#include "auth/auth.h"
#include "auth/token.h"
#include "cache/sigcache.h"
#include "core/app.h"
#include "crypto/address.h"
#include "crypto/sig.h"
#include "crypto/siwe.h"
#include "rpc/eip1271.h"

/* Messages of the current epoch and the two before it (the oldest only to name "expired"). */
#define EPOCHS 3

/* Longest contract-wallet signature accepted (CONTRACT section 11): 4096 hex digits. */
#define CONTRACT_SIG_MAX 2048

/* Addresses that fetched their SIWE message lately (direct-mapped; a power of two). */
#define SIWE_HINTS 4096
/* Bound of the running vote between the two messages (see siwe_first). */
#define SIWE_VOTE_MAX 64

typedef struct epoch_msg {
    int64_t epoch;
    char *text;
    size_t len;
    uint8_t hash[32];
    char *siwe_tail; /* the SIWE message of the epoch after its address line (crypto/siwe.h) */
    size_t siwe_tail_len;
} epoch_msg;

struct auth {
    app *app;
    secp256k1_context *ctx;
    uint8_t *secret;
    size_t secret_len;
    epoch_msg msgs[EPOCHS]; /* [0] current, [1] previous, [2] the one before */
    sigcache *cache;
    auth_stats stats;
    char (*platform)[ADDRESS_STRING_SIZE]; /* PLATFORM_ADMINS, lowercase */
    size_t nplatform;
    siwe_params siwe; /* borrows the config and the secret */
    char *siwe_uri;   /* AUTH_URI, or https:// + AUTH_DOMAIN */
    char *siwe_head;  /* the SIWE message before its address line, the same every epoch */
    size_t siwe_head_len;
    eip1271 *rpc; /* NULL without ETH_RPC_URL */
    /* Which message a new signature is tried against first: each costs a recovery, so the
     * likelier one goes first. An address that fetched its SIWE message here is likely to
     * have signed it; otherwise the kind most new signatures used lately (a vote, +1 for
     * SIWE, -1 for section 2's, bounded) decides. */
    uint8_t (*siwe_hints)[20];
    int siwe_vote;
};

enum contract_state {
    CONTRACT_NONE = 0, /* not asked */
    CONTRACT_PENDING,
    CONTRACT_VALID,
    CONTRACT_INVALID,
    CONTRACT_UNAVAILABLE, /* the RPC failed, timed out, or too many checks were in flight */
    CONTRACT_CAPPED,      /* the address is not known to hold code and the cap is spent */
};

typedef struct auth_ctx auth_ctx;
struct auth_ctx {
    uv_work_t work;
    eip1271_waiter waiter;
    request *req;
    auth *au;
    auth_next next;
    int mode;
    int flags; /* AUTH_* of auth_authenticate */
    eth_sig sig;
    uint8_t sig65[65];
    bool have_addr;
    uint8_t addr[20];
    int pending; /* halves still running */
    /* threadpool inputs (copies) and outputs */
    const secp256k1_context *ctx;
    uint8_t hashes[EPOCHS][32];
    int64_t epochs[EPOCHS];
    int tries; /* how many hashes the work may try */
    uint8_t rec[EPOCHS][20];
    bool rec_ok[EPOCHS];
    bool siwe_ok[EPOCHS];    /* rec[i] matched through the SIWE message of addr */
    const siwe_params *siwe; /* set when the work may try SIWE messages (an address given) */
    const char *siwe_head;   /* au's, immutable */
    size_t siwe_head_len;
    char *siwe_tails[EPOCHS]; /* copies in the request's memory: refresh() replaces au's */
    size_t siwe_tail_lens[EPOCHS];
    bool siwe_first; /* try the SIWE message of each epoch before section 2's */
    /* Contract wallets (EIP-1271): the signature's text, its bytes when they are no ECDSA
     * signature, and the check's state. */
    const char *sig_text;
    size_t sig_text_len;
    bool contract_only; /* not an ECDSA signature: only the wallet's contract can accept it */
    uint8_t *contract_sig;
    size_t contract_sig_len;
    int contract;        /* enum contract_state */
    int contract_epoch;  /* index into epochs[] that the contract accepted */
    int64_t retry_after; /* with CONTRACT_CAPPED */
    /* The signature cache's key of a signature accepted by a contract (contract_cache_key):
     * apart from the ECDSA key, so that a cached acceptance is known as the contract's. */
    uint8_t contract_key[65];
    bool by_contract;          /* accepted by the contract: revoked by (address, epoch) */
    bool read;                 /* a read route: revocation checks go through store_read */
    int contract_store_status; /* of the revocation check sent after the contract's answer */
    void (*contract_done)(auth_ctx *ac); /* where the contract's answer goes (auth.c's join) */
    /* results */
    bool cached;
    bool deferred; /* a read: revocation is checked with the handler's read */
    /* The write budget: charged (sent) at once when the cache already names the caller, so it
     * shares the revocation check's round trip; otherwise once the caller is known. */
    bool budget, budget_sent;
    int budget_status;
    long long budget_wait_ms;
    char budget_caller[ADDRESS_STRING_SIZE];
    int store_status;
    bool revoked;
    /* Signed in by a session token (session.c) instead of a signature: its address is the
     * caller's, its check's verdict (enum session_verdict) one of the halves. */
    const struct auth_deferred *rider; /* the check riding with the read (deferred.c) */
    /* A credential that is no signature decides itself once its halves are in (credential.c);
     * NULL for a signature. */
    void (*decide)(struct auth_ctx *ac);
    bool by_session;
    token session;
    int session_verdict;
    /* Signed in by an entity API key (apikey.c): its creator is the caller once its check's
     * verdict (enum apikey_verdict), one of the halves, says it is valid. */
    bool by_key;
    api_key key;
    int key_verdict;
    apikey_record key_rec;
    int64_t matched_epoch;
    char revocation_id[SIG_REVOCATION_ID_SIZE];
};

/* message.c: the messages of the accepted epochs. */
/* Keeps au->msgs[] on the current epoch; cheap when it has not changed. Returns 0 or -1. */
int auth_refresh(auth *au);
/* The slot of addr in the SIWE hints (an address that fetched its SIWE message lately). */
uint8_t *auth_siwe_hint(auth *au, const uint8_t addr[20]);

/* contract.c: contract wallets (EIP-1271). */
/* With ETH_RPC_URL set, a signature that is no ECDSA signature may still be a contract
 * wallet's: "0x" and an even number of hex digits, up to CONTRACT_SIG_MAX bytes. Decodes it
 * into the request's memory; false when it is none. */
bool auth_contract_parse(auth_ctx *ac, const char *s, size_t len);
/* An ECDSA signature, for its address's contract: its bytes as given, decoded once into the
 * request's memory, with their cache key. Returns 0, or -1 when they cannot be decoded. */
int auth_contract_raw_signature(auth_ctx *ac);
/* The signature cache's key of a contract wallet's signature (its exact bytes). */
void auth_contract_cache_key(const uint8_t *sig, size_t len, uint8_t out[65]);
/* Sets the revocation id of a sign-in accepted by the contract of ac->addr over `epoch`. */
void auth_contract_revocation_id(auth_ctx *ac, int64_t epoch);
/* Asks the address's contract about the signature. Returns 0 when the check is under way:
 * done(ac) runs once it is answered (and its revocation checked, where that is not deferred);
 * -1 when it cannot be asked. */
int auth_contract_check(auth_ctx *ac, void (*done)(auth_ctx *ac));

/* revocation.c: is the signature revoked. */
/* Sends EXISTS on the revocation key of ac->revocation_id (through the read cache for a read
 * route); cb gets ac. */
void auth_revocation_send(auth_ctx *ac, store_cb cb);
/* The answer of that EXISTS: STORE_OK with *revoked set, or the store's failure (a reply of
 * another type is STORE_UNAVAILABLE). */
int auth_revocation_answer(int status, const redisReply *reply, bool *revoked);
/* A read route's check is left to ride ahead of the handler's read (req->before_read). */
void auth_revocation_defer(request *req);

/* auth.c: the signature's sign-in, and the join every credential shares. */
/* A request's sign-in state, zeroed, in its arena; NULL (and the request answered) when out of
 * memory. */
auth_ctx *auth_ctx_new(request *req, int mode, int flags, auth_next next);
/* Sign-in by the query's address and signature (the seed's way). */
void auth_by_signature(request *req, int mode, int flags, auth_next next);
/* 401 unauthenticated with message. */
void auth_unauthenticated(request *req, const char *message);
/* One half is in; the last one decides (ac->decide, or the signature's decision). */
void auth_half_done(auth_ctx *ac);
/* The write budget's answer (limits_take's callback; data is the auth_ctx). */
void auth_on_budget(request *req, void *data, int status, long long wait_ms);
/* A budget unit charged for a request that is refused goes back. */
void auth_give_back(auth_ctx *ac);
/* The caller is signed in and the budget answered: on to the handler, or refused. */
void auth_after_budget(auth_ctx *ac);

/* touch.c: a credential's lastUsedAt. */
/* The leading decimal number of s (len bytes) up to the first ':' or the end, its digits'
 * count into *used (may be NULL); -1 when none. */
long long auth_leading_number(const char *s, size_t len, size_t *used);
/* When `used` (the u:<id> field read with the record) is older than the current minute, writes
 * the minute, without waiting, while the record <id> of `hash` is there. */
void auth_touch(request *req, const char *hash, size_t hash_len, const char *id, size_t id_len,
                const redisReply *used);

/* deferred.c: a credential's check riding just ahead of the handler's read. */
typedef struct auth_deferred {
    /* Sends the request's check with store_read's flags; true when cb has already run. */
    bool (*send)(request *req, int flags, store_cb cb, void *data);
    /* Its answer as the veto it puts on the request: 0 (none), 401, 503 or 504. */
    int (*veto)(request *req, int status, redisReply *reply);
} auth_deferred;
/* The check rides just ahead of the handler's first read (req->before_read, run by
 * request_read_flags); auth_check_revocation sends it alone where the handler reads nothing. */
void auth_defer(request *req, const auth_deferred *d);

/* stats.c: the metrics source (core/metrics.h) of the sign-in checks. */
void auth_stats_render(buf *out, void *ctx);

#endif
