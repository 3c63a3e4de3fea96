/* fuzz_sig: the parsers of caller-supplied identities: signatures (65-byte and EIP-2098 compact),
 * addresses (EIP-55), hex, ISO 8601 times, entity/skill/level ids and query strings, with
 * round-trip properties checked wherever a parse succeeds:
 *   - a parsed address formats (lowercase and EIP-55) to strings that parse to the same bytes;
 *   - a parsed signature formats (v 27/28 and compact) to strings that parse to the same r, s,
 *     recovery id, and the same revocation id; recovery never crashes;
 *   - a parsed time formats and parses back to the same millisecond (inside years 0000-9999);
 *   - a valid id is exactly the shape the contract gives;
 *   - query parsing yields distinct keys, and only for well-formed escapes.
 * Input: byte 0 picks the parser, the rest is the text. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <secp256k1.h>

#include "crypto/address.h"
#include "core/arena.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "http/query.h"
#include "crypto/sig.h"
#include "fuzz_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static secp256k1_context *ctx;
static uint8_t hash[32];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    static const char msg[] = "Sign in to entityd.local";
    sig_personal_hash(msg, sizeof msg - 1, hash);
    return 0;
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hex_digit_value(s[i]) < 0)
            return false;
    return true;
}

static void fuzz_address(const char *s, size_t n)
{
    uint8_t a[ADDRESS_SIZE], b[ADDRESS_SIZE];
    memset(a, 0xa5, sizeof a);
    int rc = address_parse(s, n, a);
    FUZZ_CHECK(rc == ADDRESS_OK || rc == ADDRESS_EFORMAT || rc == ADDRESS_ECHECKSUM);
    if (rc != ADDRESS_OK) {
        for (size_t i = 0; i < sizeof a; i++)
            FUZZ_CHECK(a[i] == 0xa5); /* untouched on error */
        return;
    }
    FUZZ_CHECK(n == 42 && s[0] == '0' && s[1] == 'x' && all_hex(s + 2, 40));
    char lower[ADDRESS_STRING_SIZE], sum[ADDRESS_STRING_SIZE];
    address_format_lower(a, lower);
    address_format_checksum(a, sum);
    FUZZ_CHECK(strlen(lower) == 42 && strlen(sum) == 42);
    FUZZ_CHECK(address_parse(lower, 42, b) == ADDRESS_OK && !memcmp(a, b, sizeof a));
    FUZZ_CHECK(address_parse(sum, 42, b) == ADDRESS_OK && !memcmp(a, b, sizeof a));
    /* Case-insensitively the input is the lowercase form. */
    for (size_t i = 2; i < 42; i++) {
        char ch = s[i] >= 'A' && s[i] <= 'F' ? (char)(s[i] + 32) : s[i];
        FUZZ_CHECK(ch == lower[i]);
    }
}

static void fuzz_signature(const char *s, size_t n, bool recover)
{
    eth_sig sg, again;
    memset(&sg, 0x5a, sizeof sg);
    int rc = sig_parse(s, n, &sg);
    FUZZ_CHECK(sig_strerror(rc) != NULL);
    if (rc != SIG_OK) {
        FUZZ_CHECK(rc == SIG_EHEX || rc == SIG_ELENGTH || rc == SIG_EV || rc == SIG_ERANGE ||
                   rc == SIG_EHIGHS);
        return;
    }
    FUZZ_CHECK(sg.recid == 0 || sg.recid == 1);
    char full[SIG_STRING_SIZE], compact[SIG_COMPACT_STRING_SIZE];
    char id1[SIG_REVOCATION_ID_SIZE], id2[SIG_REVOCATION_ID_SIZE];
    sig_format(&sg, full);
    sig_format_compact(&sg, compact);
    sig_revocation_id(&sg, id1);
    FUZZ_CHECK(strlen(full) == 132 && strlen(compact) == 130 && strlen(id1) == 128);
    FUZZ_CHECK(sig_parse(full, strlen(full), &again) == SIG_OK);
    FUZZ_CHECK(!memcmp(again.r, sg.r, 32) && !memcmp(again.s, sg.s, 32) && again.recid == sg.recid);
    sig_revocation_id(&again, id2);
    FUZZ_CHECK(!strcmp(id1, id2));
    FUZZ_CHECK(sig_parse(compact, strlen(compact), &again) == SIG_OK);
    FUZZ_CHECK(!memcmp(again.r, sg.r, 32) && !memcmp(again.s, sg.s, 32) && again.recid == sg.recid);
    sig_revocation_id(&again, id2);
    FUZZ_CHECK(!strcmp(id1, id2));
    /* Without the 0x prefix too. */
    FUZZ_CHECK(sig_parse(full + 2, 130, &again) == SIG_OK && again.recid == sg.recid);
    if (recover) {
        uint8_t addr[20];
        (void)sig_recover(ctx, &sg, hash, addr);
    }
}

static void fuzz_hex(const char *s, size_t n)
{
    uint8_t out[64];
    size_t want = n / 2 < sizeof out ? n / 2 : sizeof out;
    int rc = hex_decode(s, n, out, want);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        FUZZ_CHECK(n == 2 * want && all_hex(s, n));
        char back[2 * sizeof out + 1];
        hex_encode(out, want, back);
        for (size_t i = 0; i < n; i++) {
            char ch = s[i] >= 'A' && s[i] <= 'F' ? (char)(s[i] + 32) : s[i];
            FUZZ_CHECK(ch == back[i]);
        }
    }
}

static void fuzz_time(const char *s, size_t n)
{
    int64_t ms = 0, again = 0;
    if (isotime_parse(s, n, &ms) != 0)
        return;
    char iso[ISOTIME_STRING_SIZE];
    isotime_format(ms, iso);
    FUZZ_CHECK(strlen(iso) == 24);
    if (ms >= ISOTIME_MIN_MS && ms <= ISOTIME_MAX_MS) {
        FUZZ_CHECK(isotime_parse(iso, 24, &again) == 0);
        FUZZ_CHECK(again == ms);
    }
}

static void fuzz_ids(const char *s, size_t n)
{
    if (ids_valid(s, n, 'c') || ids_valid(s, n, 's')) {
        FUZZ_CHECK(n == 38 && s[1] == '-' && s[16] == '4');
        for (size_t i = 2; i < n; i++)
            FUZZ_CHECK((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == '-');
    }
    if (ids_valid_level(s, n))
        FUZZ_CHECK(n >= 1 && n <= 64 && !memchr(s, '/', n) && !memchr(s, '\0', n));
}

static void fuzz_query(const char *s, size_t n)
{
    arena pool = ARENA_INIT;
    req_param *ps = NULL;
    size_t np = 0;
    const char *bad = NULL;
    int rc = query_parse(&pool, s, n, &ps, &np, &bad);
    FUZZ_CHECK(rc == QUERY_OK || rc == QUERY_EENCODING || rc == QUERY_EREPEATED);
    /* llhttp admits no raw NUL in a request target; an escaped one is refused below. */
    if (rc == QUERY_OK && !memchr(s, '\0', n)) {
        for (size_t i = 0; i < np; i++) {
            FUZZ_CHECK(strlen(ps[i].key) == ps[i].key_len && strlen(ps[i].val) == ps[i].val_len);
            for (size_t j = i + 1; j < np; j++)
                FUZZ_CHECK(ps[i].key_len != ps[j].key_len ||
                           memcmp(ps[i].key, ps[j].key, ps[i].key_len) != 0);
        }
    } else if (rc == QUERY_EREPEATED) {
        FUZZ_CHECK(bad != NULL);
    }
    arena_reset(&pool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    /* A private copy, so that reading past the end is caught. */
    size_t n = size - 1;
    char *s = malloc(n ? n : 1);
    if (!s)
        return 0;
    memcpy(s, data + 1, n);
    switch (sel % 6) {
    case 0:
        fuzz_address(s, n);
        break;
    case 1:
        fuzz_signature(s, n, (sel & 0x80) != 0);
        break;
    case 2:
        fuzz_hex(s, n);
        break;
    case 3:
        fuzz_time(s, n);
        break;
    case 4:
        fuzz_ids(s, n);
        break;
    default:
        fuzz_query(s, n);
    }
    free(s);
    return 0;
}
