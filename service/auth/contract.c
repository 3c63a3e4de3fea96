/* auth contract: signatures of contract wallets (EIP-1271, CONTRACT section 11): the signature's
 * bytes, its cache key and revocation id, and the question to the wallet's contract through
 * rpc/eip1271.c, whose answer goes back to the function auth_contract_check was handed (the
 * join of the halves, in auth.c: this file calls nothing of auth.c's). */
#include <stdio.h>
#include <string.h>

#include "auth/auth_int.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"

/* The cache key of a contract wallet's signature (its exact bytes): keccak256 of them, then
 * 0xff where an ECDSA key has its recovery id (0 or 1), so it never names an ECDSA entry. */
void auth_contract_cache_key(const uint8_t *sig, size_t len, uint8_t out[65])
{
    keccak256(sig, len, out);
    memset(out + 32, 0xff, 33);
}

/* The revocation id of a sign-in accepted by the contract of ac->addr over the messages of
 * `epoch`: the address and the epoch, not the signature's bytes, which a Safe reads only in
 * part (bytes past its owners' signatures change nothing), so any variant of a revoked
 * signature, and the SIWE sign-in of the same epoch, is revoked with it. */
void auth_contract_revocation_id(auth_ctx *ac, int64_t epoch)
{
    char a[ADDRESS_STRING_SIZE];
    address_format_lower(ac->addr, a);
    snprintf(ac->revocation_id, sizeof ac->revocation_id, "%s:%lld", a, (long long)epoch);
    ac->by_contract = true;
}

static void on_contract_revocation(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    ac->contract_store_status = auth_revocation_answer(status, reply, &ac->revoked);
    ac->contract_done(ac);
}

static void on_contract(eip1271_waiter *w, int outcome, int which)
{
    auth_ctx *ac = (auth_ctx *)(void *)((char *)w - offsetof(auth_ctx, waiter));
    if (outcome == EIP1271_VALID) {
        ac->contract = CONTRACT_VALID;
        ac->contract_epoch = which / 2;
        /* Known only now: the revocation of (address, epoch), not the one of the signature's
         * r||s (checked up front for a key's signature), decides. A read's check still rides
         * with its data (deferred); otherwise one more round trip, after the RPC's. */
        auth_contract_revocation_id(ac, ac->epochs[ac->contract_epoch]);
        ac->revoked = false;
        if (!ac->deferred) {
            auth_revocation_send(ac, on_contract_revocation);
            return;
        }
    } else if (outcome == EIP1271_CAPPED) {
        ac->contract = CONTRACT_CAPPED;
        ac->retry_after = w->retry_after;
    } else {
        ac->contract = outcome == EIP1271_INVALID ? CONTRACT_INVALID : CONTRACT_UNAVAILABLE;
    }
    ac->contract_done(ac);
}

/* An ECDSA signature, for its address's contract: its bytes as given (a Safe reads v, which
 * the parsed form normalizes), decoded once into the request's memory, with their cache key.
 * Returns 0, or -1 when they cannot be decoded. */
int auth_contract_raw_signature(auth_ctx *ac)
{
    if (ac->contract_sig)
        return 0;
    const char *h = ac->sig_text;
    size_t n = ac->sig_text_len;
    if (n >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) {
        h += 2;
        n -= 2;
    }
    uint8_t *bytes = arena_alloc(&ac->req->pool, n / 2 + 1);
    if (!bytes || n % 2 || hex_decode(h, n, bytes, n / 2) != 0)
        return -1;
    ac->contract_sig = bytes;
    ac->contract_sig_len = n / 2;
    auth_contract_cache_key(bytes, n / 2, ac->contract_key);
    return 0;
}

/* Asks the address's contract about the signature, for the messages of the two accepted
 * epochs (section 2's and the SIWE one of the address): one batched call. Returns 0 when the
 * check is under way (done(ac) runs once it is answered), -1 when it cannot be asked (the signature
 * is then refused as not matching). */
int auth_contract_check(auth_ctx *ac, void (*done)(auth_ctx *ac))
{
    auth *au = ac->au;
    ac->contract_done = done;
    if (auth_contract_raw_signature(ac) != 0)
        return -1;
    uint8_t hashes[4][32], key[32];
    for (int i = 0; i < 2; i++) {
        memcpy(hashes[2 * i], ac->hashes[i], 32);
        if (siwe_hash(&au->siwe, ac->addr, ac->epochs[i], hashes[2 * i + 1]) != 0)
            return -1;
    }
    eip1271_key(ac->addr, ac->contract_sig, ac->contract_sig_len, ac->epochs[0], key);
    ac->contract = CONTRACT_PENDING;
    ac->waiter.cb = on_contract;
    eip1271_check(au->rpc, key, ac->addr, ac->contract_sig, ac->contract_sig_len,
                  (const uint8_t(*)[32])hashes, 4, &ac->waiter);
    return 0;
}

/* With ETH_RPC_URL set, a signature that is no ECDSA signature may still be a contract
 * wallet's: "0x" and an even number of hex digits, up to CONTRACT_SIG_MAX bytes. Decodes it
 * into the request's memory. */
bool auth_contract_parse(auth_ctx *ac, const char *s, size_t len)
{
    if (len < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return false;
    s += 2;
    len -= 2;
    if (len == 0 || len % 2 || len / 2 > CONTRACT_SIG_MAX)
        return false;
    ac->contract_sig = arena_alloc(&ac->req->pool, len / 2);
    if (!ac->contract_sig || hex_decode(s, len, ac->contract_sig, len / 2) != 0)
        return false;
    ac->contract_sig_len = len / 2;
    return true;
}
