/* auth: the sign-in step on requests built by hand, answered into a sink of the test, with real
 * signatures (crypto layer) and a store that is closed, so that every Redis command answers
 * STORE_UNAVAILABLE at once: missing, malformed, mismatched, high-s and expired signatures are
 * refused; a valid one reaches the revocation check (503 with the store closed), first or with
 * the handler's read; every spelling of one signature behaves alike; AUTH_OPTIONAL and
 * AUTH_RECOVER; the recovery runs on the threadpool. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <llhttp.h>
#include <secp256k1.h>

#include "auth/auth.h"
#include "core/app.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/address.h"
#include "crypto/sig.h"
#include "crypto/signin.h"
#include "redis/store.h"

#define SECRET        "auth-unit-test-secret"
#define EPOCH_SECONDS 86400

/* --- what the request was answered, and what the handler saw --- */

enum next_mode {
    NEXT_REPLY, /* the handler answers 200 at once */
    NEXT_READ,  /* the handler reads (store_read with request_read_flags), then answers 200 */
};

static struct {
    int answers;
    int status;
    char body[1024];
    char extra[256];
    int next_calls;
    char caller[43];
    bool signed_in;
    bool had_revocation_key;
    enum next_mode next_mode;
    int read_status;
    int64_t epoch;
    char revocation_id[SIG_REVOCATION_ID_SIZE];
} g;

static void sink_answer(request *req, int status, const char *ctype, const char *extra,
                        const slice *parts, size_t n)
{
    (void)req;
    (void)ctype;
    g.answers++;
    g.status = status;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(off + parts[i].len < sizeof g.body);
        memcpy(g.body + off, parts[i].s, parts[i].len);
        off += parts[i].len;
    }
    g.body[off] = '\0';
    snprintf(g.extra, sizeof g.extra, "%s", extra ? extra : "");
}

static void sink_done(request *req)
{
    request_reset(req); /* as the HTTP layer does: the arena (and the auth state) goes */
}

static const request_sink sink = {.answer = sink_answer, .done = sink_done};

static void on_read(void *data, int status, redisReply *reply)
{
    (void)reply;
    request *req = data;
    g.read_status = status;
    request_reply_raw(req, 200, "text/plain", "read", 4);
}

static void next(request *req)
{
    g.next_calls++;
    memcpy(g.caller, req->caller, sizeof g.caller);
    g.signed_in = req->signed_in;
    g.had_revocation_key = req->before_read != NULL;
    g.epoch = auth_request_epoch(req);
    snprintf(g.revocation_id, sizeof g.revocation_id, "%s", auth_request_revocation_id(req));
    if (g.next_mode == NEXT_READ) {
        const char *argv[] = {"GET", "some:key"};
        size_t lens[] = {3, 8};
        store_read(req->app->store, request_read_flags(req), on_read, req, 2, argv, lens);
        return;
    }
    request_reply_raw(req, 200, "text/plain", "ok", 2);
}

/* --- the app: config, verifier, a closed store --- */

static config cfg;
static app the_app;
static uv_loop_t loop;
static request req;
static req_param params[2];

static int setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof g);
    assert_int_equal(uv_loop_init(&loop), 0);
    memset(&the_app, 0, sizeof the_app);
    the_app.loop = &loop;
    the_app.cfg = cfg;
    char err[256];
    if (auth_new(&the_app.auth, &the_app, err, sizeof err) != 0)
        fail_msg("auth_new: %s", err);
    if (store_new(&the_app.store, &the_app, err, sizeof err) != 0)
        fail_msg("store_new: %s", err);
    store_close(the_app.store);
    assert_false(store_ready(the_app.store));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    request_reset(&req);
    buf_free(&req.url);
    buf_free(&req.body);
    uv_run(&loop, UV_RUN_DEFAULT); /* the store's handles close, a lookup under way returns */
    auth_free(the_app.auth);
    store_free(the_app.store);
    metrics_reset_sources();
    assert_int_equal(uv_loop_close(&loop), 0);
    return 0;
}

/* A fresh request with the query parameters given (NULL: absent). */
static void make_request(const char *address, const char *signature)
{
    request_reset(&req);
    req.sink = &sink;
    req.sink_ctx = NULL;
    req.app = &the_app;
    req.method = HTTP_GET;
    req.route_slot = -1;
    req.route_name = "/test";
    size_t n = 0;
    if (address)
        params[n++] = (req_param){"address", address, 7, strlen(address)};
    if (signature)
        params[n++] = (req_param){"signature", signature, 9, strlen(signature)};
    req.params = params;
    req.nparams = n;
}

/* Runs the loop until the request is answered (bounded: about two seconds). */
static void run_until_answered(void)
{
    for (int i = 0; i < 4000 && g.answers == 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (g.answers == 0)
            usleep(500);
    }
    assert_int_equal(g.answers, 1);
}

/* auth_authenticate, asserting that the answer waits for the threadpool, then the loop run. */
static void authenticate_async(int mode, bool deferred)
{
    auth_authenticate(&req, mode, deferred, next);
    assert_int_equal(g.answers, 0); /* the recovery is on the threadpool: nothing yet */
    assert_int_equal(g.next_calls, 0);
    run_until_answered();
}

/* auth_authenticate, asserting that it answered before returning (no threadpool, no loop). */
static void authenticate_sync(int mode, bool deferred)
{
    auth_authenticate(&req, mode, deferred, next);
    assert_int_equal(g.answers, 1);
}

static void assert_failed(int status, const char *code)
{
    assert_int_equal(g.status, status);
    char prefix[96];
    snprintf(prefix, sizeof prefix, "{\"success\":false,\"error\":{\"code\":\"%s\"", code);
    if (strncmp(g.body, prefix, strlen(prefix)) != 0)
        fail_msg("body %s, want %s...", g.body, prefix);
    assert_int_equal(g.next_calls, 0);
}

static void assert_store_unavailable(void)
{
    assert_failed(503, "unavailable");
    assert_string_equal(g.extra, "Retry-After: 1\r\n");
}

/* The handler ran, and the revocation check that rode with its read overrode its answer. */
static void assert_vetoed(void)
{
    assert_int_equal(g.next_calls, 1);
    assert_true(g.signed_in);
    assert_true(g.had_revocation_key);
    assert_int_equal(g.status, 503);
    assert_non_null(strstr(g.body, "\"code\":\"unavailable\""));
    assert_string_equal(g.extra, "Retry-After: 1\r\n");
}

/* --- keys and signatures --- */

typedef struct signer {
    uint8_t key[32];
    char address[ADDRESS_STRING_SIZE];       /* EIP-55 */
    char address_lower[ADDRESS_STRING_SIZE]; /* as req->caller holds it */
} signer;

static secp256k1_context *sctx;

static signer make_signer(uint8_t fill)
{
    signer s;
    memset(s.key, fill, sizeof s.key);
    secp256k1_pubkey pub;
    assert_int_equal(secp256k1_ec_pubkey_create(sctx, &pub, s.key), 1);
    uint8_t ser[65];
    size_t len = sizeof ser;
    secp256k1_ec_pubkey_serialize(sctx, ser, &len, &pub, SECP256K1_EC_UNCOMPRESSED);
    uint8_t a[ADDRESS_SIZE];
    address_from_pubkey(ser, a);
    address_format_checksum(a, s.address);
    address_format_lower(a, s.address_lower);
    return s;
}

/* The service's message of epoch (what GET /api/auth/message gave out then). */
static size_t message_of_epoch(int64_t epoch, char *out, size_t cap)
{
    size_t n = signin_message(cfg.auth_domain, (const uint8_t *)SECRET, strlen(SECRET),
                              EPOCH_SECONDS, epoch, out, cap);
    assert_true(n > 0);
    return n;
}

static eth_sig sign_text(const signer *s, const char *text, size_t len)
{
    uint8_t hash[32];
    sig_personal_hash(text, len, hash);
    eth_sig sig;
    assert_int_equal(sig_sign(sctx, s->key, hash, &sig), 0);
    return sig;
}

static eth_sig sign_current(const signer *s)
{
    auth_message m;
    auth_current_message(the_app.auth, &m);
    /* The message handed out is the one this test can rebuild from the secret. */
    char text[512];
    size_t n = message_of_epoch(m.epoch, text, sizeof text);
    assert_int_equal(n, m.len);
    assert_memory_equal(text, m.text, n);
    return sign_text(s, m.text, m.len);
}

static eth_sig sign_epoch(const signer *s, int64_t epoch)
{
    char text[512];
    size_t n = message_of_epoch(epoch, text, sizeof text);
    return sign_text(s, text, n);
}

static int64_t current_epoch(void)
{
    auth_message m;
    auth_current_message(the_app.auth, &m);
    return m.epoch;
}

enum form { FORM_V27, FORM_V0, FORM_COMPACT, NFORMS };

static void format_sig(const eth_sig *sig, enum form f, char out[SIG_STRING_SIZE])
{
    if (f == FORM_COMPACT) {
        sig_format_compact(sig, out);
        assert_int_equal(strlen(out), 130);
        return;
    }
    sig_format(sig, out);
    assert_int_equal(strlen(out), 132);
    if (f == FORM_V0) /* v 27/28 written as 0/1 */
        memcpy(out + 130, sig->recid ? "01" : "00", 2);
}

static const auth_stats *stats(void)
{
    return auth_get_stats(the_app.auth);
}

/* --- refusals before any recovery --- */

static void test_required_without_signature_is_401(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    make_request(a.address, NULL);
    authenticate_sync(AUTH_REQUIRED, false);
    assert_failed(401, "unauthenticated");
    assert_int_equal(stats()->missing, 1);
    assert_int_equal(stats()->queued, 0);

    memset(&g, 0, sizeof g); /* an empty signature is no signature */
    make_request(a.address, "");
    authenticate_sync(AUTH_REQUIRED, false);
    assert_failed(401, "unauthenticated");
    assert_int_equal(stats()->missing, 2);
}

static void test_required_without_address_is_400(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_V27, sig);
    make_request(NULL, sig);
    authenticate_sync(AUTH_REQUIRED, false);
    assert_failed(400, "invalid_request");
    assert_non_null(strstr(g.body, "\"field\":\"address\""));

    /* An address whose EIP-55 checksum fails: one letter's case flipped. */
    memset(&g, 0, sizeof g);
    char bad[ADDRESS_STRING_SIZE];
    memcpy(bad, a.address, sizeof bad);
    size_t i = 2;
    while (!((bad[i] >= 'a' && bad[i] <= 'f') || (bad[i] >= 'A' && bad[i] <= 'F')))
        i++;
    bad[i] ^= 0x20;
    make_request(bad, sig);
    authenticate_sync(AUTH_REQUIRED, false);
    assert_failed(400, "invalid_request");
    assert_non_null(strstr(g.body, "checksum"));
    assert_int_equal(stats()->queued, 0);
}

static void test_malformed_signatures_are_401(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char good[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_V27, good);

    char not_hex[SIG_STRING_SIZE], bad_v[SIG_STRING_SIZE], zero_r[SIG_STRING_SIZE];
    memcpy(not_hex, good, sizeof good);
    not_hex[40] = 'g';
    memcpy(bad_v, good, sizeof good);
    memcpy(bad_v + 130, "1d", 2); /* v = 29 */
    memcpy(zero_r, good, sizeof good);
    memset(zero_r + 2, '0', 64);
    const char *cases[] = {"0x1234", not_hex, bad_v, zero_r, good + 2 /* no 0x: accepted */};
    for (size_t i = 0; i < 4; i++) {
        memset(&g, 0, sizeof g);
        make_request(a.address, cases[i]);
        authenticate_sync(AUTH_REQUIRED, true);
        assert_failed(401, "unauthenticated");
        assert_non_null(strstr(g.body, "malformed"));
        assert_int_equal(stats()->malformed, i + 1);
    }
    assert_int_equal(stats()->queued, 0); /* nothing went to the threadpool */

    /* The control: the same signature unharmed, without its 0x, passes. */
    memset(&g, 0, sizeof g);
    make_request(a.address, cases[4]);
    authenticate_async(AUTH_REQUIRED, true);
    assert_int_equal(g.next_calls, 1);
}

static void test_high_s_is_401(void **state)
{
    (void)state;
    static const uint8_t n[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xfe, 0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48,
                                  0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41};
    signer a = make_signer(0x11);
    eth_sig s = sign_current(&a);
    /* The same signature with s' = n - s and the other recovery id: valid ECDSA, but EIP-2
     * forbids it (malleability). */
    eth_sig high = s;
    int borrow = 0;
    for (int i = 31; i >= 0; i--) {
        int d = n[i] - s.s[i] - borrow;
        borrow = d < 0;
        high.s[i] = (uint8_t)(d + (borrow ? 256 : 0));
    }
    high.recid = s.recid ^ 1;
    assert_true(memcmp(high.s, n, 32) < 0 && memcmp(high.s, s.s, 32) > 0);

    char sig[SIG_STRING_SIZE];
    format_sig(&high, FORM_V27, sig);
    make_request(a.address, sig);
    authenticate_sync(AUTH_REQUIRED, true);
    assert_failed(401, "unauthenticated");
    assert_non_null(strstr(g.body, "malformed"));
    assert_int_equal(stats()->malformed, 1);
    assert_int_equal(stats()->ok, 0);
}

/* --- recovery and its verdicts (the revocation check deferred to the handler's read, so
 * that the closed store does not answer first) --- */

static void test_signature_of_another_address_is_401(void **state)
{
    (void)state;
    signer a = make_signer(0x11), b = make_signer(0x22);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&b);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    authenticate_async(AUTH_REQUIRED, true);
    assert_failed(401, "unauthenticated");
    assert_non_null(strstr(g.body, "does not match"));
    assert_int_equal(stats()->mismatch, 1);
    assert_int_equal(stats()->queued, 1);
    assert_int_equal(stats()->queue_depth, 0);
}

static void test_signature_over_an_expired_epoch_is_401(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_epoch(&a, current_epoch() - 2);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    authenticate_async(AUTH_REQUIRED, true);
    assert_failed(401, "unauthenticated");
    assert_non_null(strstr(g.body, "expired"));
    assert_int_equal(stats()->expired, 1);
    assert_int_equal(stats()->mismatch, 0);

    /* Older still: no longer told apart from any other message. */
    memset(&g, 0, sizeof g);
    s = sign_epoch(&a, current_epoch() - 3);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    authenticate_async(AUTH_REQUIRED, true);
    assert_failed(401, "unauthenticated");
    assert_int_equal(stats()->mismatch, 1);
}

static void test_signature_over_the_previous_epoch_is_accepted(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    int64_t e = current_epoch();
    eth_sig s = sign_epoch(&a, e - 1);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    g.next_mode = NEXT_READ;
    authenticate_async(AUTH_REQUIRED, true);
    assert_int_equal(g.next_calls, 1);
    assert_string_equal(g.caller, a.address_lower);
    assert_int_equal(stats()->ok, 1);
    /* The handler's read carried the revocation check, which the closed store refused. */
    assert_int_equal(g.epoch, e - 1);
    assert_int_equal(g.read_status, STORE_UNAVAILABLE);
    assert_vetoed();
}

/* --- a valid signature and the revocation check --- */

static void test_valid_signature_reaches_the_revocation_check(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_V27, sig);

    /* Checked first (a write): the closed store answers, the handler never runs. */
    make_request(a.address, sig);
    authenticate_async(AUTH_REQUIRED, false);
    assert_store_unavailable();
    assert_int_equal(stats()->ok, 0);
    assert_int_equal(stats()->queued, 1);
    /* The store decides first: a signature of someone else meets the same 503. */
    signer b = make_signer(0x22);
    memset(&g, 0, sizeof g);
    make_request(b.address, sig);
    authenticate_async(AUTH_REQUIRED, false);
    assert_store_unavailable();

    /* Checked with the handler's read: the signature passed (the handler ran as the signer),
     * and the check the read carried turned its 200 into 503. */
    memset(&g, 0, sizeof g);
    g.next_mode = NEXT_READ;
    make_request(a.address, sig);
    authenticate_async(AUTH_REQUIRED, true);
    assert_string_equal(g.caller, a.address_lower);
    assert_int_equal(g.epoch, current_epoch());
    char rid[SIG_REVOCATION_ID_SIZE];
    sig_revocation_id(&s, rid);
    assert_string_equal(g.revocation_id, rid);
    assert_int_equal(g.read_status, STORE_UNAVAILABLE);
    assert_vetoed();
    assert_int_equal(stats()->ok, 1);
}

static void test_handler_may_not_skip_the_deferred_check(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    g.next_mode = NEXT_REPLY; /* answers 200 without request_read_flags */
    authenticate_async(AUTH_REQUIRED, true);
    assert_int_equal(g.next_calls, 1);
    assert_true(g.had_revocation_key);
    assert_int_equal(g.status, 500);
    assert_non_null(strstr(g.body, "\"code\":\"internal\""));
}

static void test_every_spelling_of_a_signature_behaves_alike(void **state)
{
    signer a = make_signer(0x11);
    char first_rid[SIG_REVOCATION_ID_SIZE] = "";
    for (int f = 0; f < NFORMS; f++) {
        for (int deferred = 0; deferred < 2; deferred++) {
            if (f || deferred) { /* each on a fresh verifier: recovered, not cached */
                teardown(state);
                setup(state);
            }
            char sig[SIG_STRING_SIZE];
            eth_sig s = sign_current(&a);
            format_sig(&s, (enum form)f, sig);
            make_request(a.address, sig);
            g.next_mode = NEXT_READ;
            authenticate_async(AUTH_REQUIRED, deferred);
            assert_int_equal(stats()->queued, 1);
            if (!deferred) {
                assert_store_unavailable();
                continue;
            }
            assert_string_equal(g.caller, a.address_lower);
            assert_vetoed();
            if (!first_rid[0])
                memcpy(first_rid, g.revocation_id, sizeof first_rid);
            assert_string_equal(g.revocation_id, first_rid); /* one id for every spelling */
        }
    }

    /* On one verifier, the other spellings are the same cache entry. */
    teardown(state);
    setup(state);
    for (int f = 0; f < NFORMS; f++) {
        memset(&g, 0, sizeof g);
        char sig[SIG_STRING_SIZE];
        eth_sig s = sign_current(&a);
        format_sig(&s, (enum form)f, sig);
        make_request(a.address, sig);
        g.next_mode = NEXT_READ;
        if (f == 0)
            authenticate_async(AUTH_REQUIRED, true);
        else
            authenticate_sync(AUTH_REQUIRED, true); /* from the cache: no threadpool */
        assert_string_equal(g.caller, a.address_lower);
        assert_vetoed();
    }
    assert_int_equal(stats()->queued, 1);
    assert_int_equal(stats()->cache_hits, NFORMS - 1);
    assert_int_equal(stats()->ok, NFORMS);
}

/* --- AUTH_OPTIONAL and AUTH_RECOVER --- */

static void test_optional_without_signature_runs_with_no_caller(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    make_request(a.address, NULL);
    authenticate_sync(AUTH_OPTIONAL, false);
    assert_int_equal(g.next_calls, 1);
    assert_string_equal(g.caller, "");
    assert_false(g.signed_in);
    assert_false(g.had_revocation_key);
    assert_int_equal(g.status, 200);
    assert_int_equal(stats()->missing, 0);
    assert_int_equal(stats()->queued, 0);

    /* The address is still required. */
    memset(&g, 0, sizeof g);
    make_request(NULL, NULL);
    authenticate_sync(AUTH_OPTIONAL, false);
    assert_failed(400, "invalid_request");

    /* A signature given is verified all the same. */
    signer b = make_signer(0x22);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&b);
    format_sig(&s, FORM_V27, sig);
    memset(&g, 0, sizeof g);
    make_request(a.address, sig);
    authenticate_async(AUTH_OPTIONAL, true);
    assert_failed(401, "unauthenticated");
}

static void test_recover_without_address(void **state)
{
    (void)state;
    signer a = make_signer(0x33);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_COMPACT, sig);

    /* Checked first: the revocation check answers 503, the handler never runs. */
    make_request(NULL, sig);
    authenticate_async(AUTH_RECOVER, false);
    assert_store_unavailable();

    /* Checked with the read: the caller is the recovered address. */
    memset(&g, 0, sizeof g);
    g.next_mode = NEXT_READ;
    make_request(NULL, sig);
    authenticate_async(AUTH_RECOVER, true);
    assert_string_equal(g.caller, a.address_lower);
    assert_vetoed();

    /* Without a signature: 401. */
    memset(&g, 0, sizeof g);
    make_request(NULL, NULL);
    authenticate_sync(AUTH_RECOVER, false);
    assert_failed(401, "unauthenticated");

    /* Without an address only the current message is tried: a signature over the previous
     * one recovers to some other key's address, which is then the caller. */
    memset(&g, 0, sizeof g);
    s = sign_epoch(&a, current_epoch() - 1);
    format_sig(&s, FORM_V27, sig);
    make_request(NULL, sig);
    g.next_mode = NEXT_READ;
    authenticate_async(AUTH_RECOVER, true);
    assert_int_equal(g.next_calls, 1);
    assert_string_not_equal(g.caller, a.address_lower);
    assert_int_equal(strlen(g.caller), 42);

    /* With an address it must match, as for AUTH_REQUIRED. */
    signer b = make_signer(0x44);
    s = sign_current(&a);
    format_sig(&s, FORM_V27, sig);
    memset(&g, 0, sizeof g);
    make_request(b.address, sig);
    authenticate_async(AUTH_RECOVER, true);
    assert_failed(401, "unauthenticated");
}

static void test_recovery_runs_on_the_threadpool(void **state)
{
    (void)state;
    signer a = make_signer(0x11);
    char sig[SIG_STRING_SIZE];
    eth_sig s = sign_current(&a);
    format_sig(&s, FORM_V27, sig);
    make_request(a.address, sig);
    g.next_mode = NEXT_READ;
    auth_authenticate(&req, AUTH_REQUIRED, true, next);
    assert_int_equal(stats()->queue_depth, 1);
    assert_int_equal(stats()->queued, 1);
    usleep(20000); /* the work is done by now, its answer waits for the loop */
    assert_int_equal(g.answers, 0);
    assert_int_equal(g.next_calls, 0);
    run_until_answered();
    assert_int_equal(stats()->queue_depth, 0);
    assert_vetoed();
}

int main(void)
{
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(devnull >= 0);
    log_init(NULL, devnull, 1 << 20);
    sctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    assert_non_null(sctx);

    /* A loopback port nobody listens on (the store is closed before it would connect). */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t slen = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &slen), 0);
    close(fd);
    char url[64], epoch_seconds[16];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", ntohs(sa.sin_port));
    snprintf(epoch_seconds, sizeof epoch_seconds, "%d", EPOCH_SECONDS);
    setenv("REDIS_URL", url, 1);
    setenv("AUTH_SECRET", SECRET, 1);
    setenv("AUTH_EPOCH_SECONDS", epoch_seconds, 1);
    setenv("AUTH_DOMAIN", "unit.example", 1);
    char err[256], *argv[] = {"test_auth", NULL};
    if (config_load(&cfg, 1, argv, err, sizeof err) != CONFIG_OK) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }

    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_required_without_signature_is_401),
        T(test_required_without_address_is_400),
        T(test_malformed_signatures_are_401),
        T(test_high_s_is_401),
        T(test_signature_of_another_address_is_401),
        T(test_signature_over_an_expired_epoch_is_401),
        T(test_signature_over_the_previous_epoch_is_accepted),
        T(test_valid_signature_reaches_the_revocation_check),
        T(test_handler_may_not_skip_the_deferred_check),
        T(test_every_spelling_of_a_signature_behaves_alike),
        T(test_optional_without_signature_runs_with_no_caller),
        T(test_recover_without_address),
        T(test_recovery_runs_on_the_threadpool),
#undef T
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    secp256k1_context_destroy(sctx);
    config_free(&cfg);
    close(devnull);
    return rc;
}
