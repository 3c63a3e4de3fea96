/* attester: signs levels reached as EAS off-chain attestations (version 2, EIP-712). Every
 * hash and signature of a cold attestation is computed on the threadpool from the job's own
 * copies; the loop only looks up the cache, copies inputs and assembles answers. The key, the
 * secret and the domain are written before the loop runs and only read afterwards. */
#include "jobs/attester.h"

#include <jansson.h>
#include <secp256k1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/attestcache.h"
#include "core/buf.h"
#include "core/metrics.h"
#include "core/pool.h"
#include "crypto/address.h"
#include "crypto/eas.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"
#include "crypto/keyfile.h"
#include "crypto/sig.h"

/* A well-known development key (the first account of common local test chains): public, so
 * --dev attestations prove nothing, by design. */
static const char dev_key_hex[] =
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

static const char types_json[] =
    "{\"Attest\":[{\"name\":\"version\",\"type\":\"uint16\"},"
    "{\"name\":\"schema\",\"type\":\"bytes32\"},{\"name\":\"recipient\",\"type\":\"address\"},"
    "{\"name\":\"time\",\"type\":\"uint64\"},{\"name\":\"expirationTime\",\"type\":\"uint64\"},"
    "{\"name\":\"revocable\",\"type\":\"bool\"},{\"name\":\"refUID\",\"type\":\"bytes32\"},"
    "{\"name\":\"data\",\"type\":\"bytes\"},{\"name\":\"salt\",\"type\":\"bytes32\"}]}";

/* The fixed bytes of one rendered attestation besides its domain, data and level id. */
#define RENDER_FIXED 1600

struct attester {
    uint8_t key[32];
    uint8_t secret[32]; /* salts derive from it (eas_salt_secret) */
    secp256k1_context *ctx;
    uint8_t domain[32]; /* the EIP-712 domain separator */
    uint8_t schema[32];
    uint8_t contract[20];
    uint64_t chain_id;
    char schema_hex[EAS_HEX32_SIZE];
    char signer[ADDRESS_STRING_SIZE];
    char *domain_json;
    size_t domain_json_len;
    char *config_json;
    size_t config_json_len;
    attestcache *cache;
    uint64_t signed_total, jobs_total, jobs_pending;
};

static void render_metrics(buf *out, void *ctx)
{
    const attester *at = ctx;
    metrics_counter(out, "entityd_attestations_signed_total",
                    "Attestations signed (cache misses: each one secp256k1 signature).",
                    at->signed_total);
    metrics_counter(out, "entityd_attestation_cache_hits_total",
                    "Attestations answered from the cache of signed attestations.",
                    attestcache_hits(at->cache));
    metrics_counter(out, "entityd_attestation_sign_jobs_total",
                    "Signing jobs queued on the threadpool (one per read with a miss).",
                    at->jobs_total);
    metrics_gauge(out, "entityd_attestation_sign_jobs_pending",
                  "Signing jobs queued or running on the threadpool.", (double)at->jobs_pending);
}

/* Printable ASCII without quotes or backslashes: embedded in JSON as is. */
static bool plain_text(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
            return false;
    return true;
}

static int build_json(attester *at, const config *cfg, char *err, size_t err_len)
{
    char contract[ADDRESS_STRING_SIZE];
    address_format_checksum(at->contract, contract);
    buf b = {0};
    buf_printf(&b,
               "{\"name\":\"" EAS_DOMAIN_NAME "\",\"version\":\"%s\",\"chainId\":%llu,"
               "\"verifyingContract\":\"%s\"}",
               cfg->attestation_eas_version, (unsigned long long)at->chain_id, contract);
    buf c = {0};
    buf_printf(&c,
               "{\"success\":true,\"data\":{\"attester\":\"%s\",\"chainId\":%llu,\"eas\":\"%s\","
               "\"easVersion\":\"%s\",\"schemas\":{\"levelReached\":{\"uid\":\"%s\",\"schema\":"
               "\"" EAS_LEVEL_SCHEMA "\",\"resolver\":\"0x0000000000000000000000000000000000000000"
               "\",\"revocable\":true}}}}",
               at->signer, (unsigned long long)at->chain_id, contract, cfg->attestation_eas_version,
               at->schema_hex);
    if (!b.data || !c.data) {
        buf_free(&b);
        buf_free(&c);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    at->domain_json = b.data, at->domain_json_len = b.len;
    at->config_json = c.data, at->config_json_len = c.len;
    return 0;
}

int attester_new(attester **out, const config *cfg, bool *dev_key, char *err, size_t err_len)
{
    *out = NULL;
    *dev_key = false;
    if (!*cfg->attestation_key_file && !cfg->dev)
        return 0;
    uint8_t contract[20];
    const char *ea = cfg->attestation_eas_address;
    int e = address_parse(ea, strlen(ea), contract);
    if (e != ADDRESS_OK) {
        snprintf(err, err_len, "ATTESTATION_EAS_ADDRESS %s",
                 e == ADDRESS_ECHECKSUM ? "fails its EIP-55 checksum"
                                        : "must be 0x followed by 40 hex digits");
        return -1;
    }
    const char *ver = cfg->attestation_eas_version;
    if (!*ver || strlen(ver) > 32 || !plain_text(ver)) {
        snprintf(err, err_len,
                 "ATTESTATION_EAS_VERSION must be 1 to 32 printable characters "
                 "without quotes or backslashes");
        return -1;
    }
    attester *at = calloc(1, sizeof *at);
    if (!at || !(at->ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE))) {
        free(at);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    int rc;
    if (*cfg->attestation_key_file) {
        rc = keyfile_load(at->ctx, cfg->attestation_key_file, at->key, err, err_len);
    } else {
        rc = keyfile_parse(at->ctx, dev_key_hex, sizeof dev_key_hex - 1, at->key, err, err_len);
        *dev_key = true;
    }
    uint8_t rnd[32];
    keccak256(at->key, 32, rnd); /* blinding seed: side-channel hardening, not secrecy */
    secp256k1_pubkey pub;
    uint8_t pub65[65], addr[20];
    size_t pub_len = sizeof pub65;
    if (rc == 0 && (!secp256k1_context_randomize(at->ctx, rnd) ||
                    !secp256k1_ec_pubkey_create(at->ctx, &pub, at->key) ||
                    !secp256k1_ec_pubkey_serialize(at->ctx, pub65, &pub_len, &pub,
                                                   SECP256K1_EC_UNCOMPRESSED))) {
        snprintf(err, err_len, "ATTESTATION_KEY_FILE: cannot derive the public key");
        rc = -1;
    }
    keyfile_wipe(rnd, sizeof rnd);
    if (rc != 0) {
        attester_free(at);
        return -1;
    }
    address_from_pubkey(pub65, addr);
    address_format_checksum(addr, at->signer);
    memcpy(at->contract, contract, 20);
    at->chain_id = (uint64_t)cfg->attestation_chain_id;
    eas_salt_secret(at->key, at->secret);
    eip712_domain_separator(EAS_DOMAIN_NAME, sizeof EAS_DOMAIN_NAME - 1, ver, strlen(ver),
                            at->chain_id, at->contract, at->domain);
    uint8_t zero[20] = {0};
    eas_schema_uid(EAS_LEVEL_SCHEMA, sizeof EAS_LEVEL_SCHEMA - 1, zero, true, at->schema);
    eas_hex32(at->schema, at->schema_hex);
    at->cache = attestcache_new((size_t)cfg->attestation_cache_size);
    if (!at->cache || build_json(at, cfg, err, err_len) != 0) {
        if (!at->cache)
            snprintf(err, err_len, "out of memory");
        attester_free(at);
        return -1;
    }
    metrics_register(render_metrics, at);
    *out = at;
    return 0;
}

void attester_free(attester *at)
{
    if (!at)
        return;
    keyfile_wipe(at->key, sizeof at->key);
    keyfile_wipe(at->secret, sizeof at->secret);
    if (at->ctx)
        secp256k1_context_destroy(at->ctx);
    attestcache_free(at->cache);
    free(at->domain_json);
    free(at->config_json);
    free(at);
}

const char *attester_config_json(const attester *at, size_t *len)
{
    *len = at->config_json_len;
    return at->config_json;
}

const char *attester_address(const attester *at)
{
    return at->signer;
}

/* ---- one attestation, rendered ---- */

/* One level to sign, in the job's memory. */
typedef struct task {
    attest_item *item;
    eas_level_fields f;
    char *out;
    size_t cap;
} task;

typedef struct job {
    uv_work_t work;
    attester *at;
    uint8_t recipient[20];
    char recipient_text[ADDRESS_STRING_SIZE];
    task *tasks;
    size_t n, signed_ok;
    void (*done)(void *ctx, int status);
    void *ctx;
} job;

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

static char *put_hex32(char *p, const uint8_t v[32])
{
    eas_hex32(v, p);
    return p + EAS_HEX32_SIZE - 1;
}

static char *put_uint(char *p, uint64_t v)
{
    char d[20];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = d[--n];
    return p;
}

static size_t render_cap(const attester *at, size_t level_id_len, size_t data_len)
{
    return RENDER_FIXED + at->domain_json_len + level_id_len + 2 * data_len;
}

/* Hashes, signs and renders one attestation into t->out; returns its length, or 0 when
 * signing failed. Runs on a pool thread: reads only the attester's immutable fields. */
static size_t sign_one(const attester *at, const job *j, task *t)
{
    size_t data_len = eas_level_data_size(&t->f);
    /* A pool thread never allocates from the request's arena: that belongs to the loop. */
    uint8_t *data = malloc(data_len);
    if (!data)
        return 0;
    eas_level_data(&t->f, data);
    uint8_t dh[32];
    keccak256(data, data_len, dh);
    eas_attest m = {.time = t->f.reached_at,
                    .revocable = true,
                    .data = data,
                    .data_len = data_len,
                    .data_hash = dh};
    memcpy(m.schema, at->schema, 32);
    memcpy(m.recipient, j->recipient, 20);
    eas_salt(at->secret, at->chain_id, at->contract, &m, m.salt);
    uint8_t sh[32], digest[32], uid[32];
    eas_attest_struct_hash(&m, sh);
    eip712_digest(at->domain, sh, digest);
    eas_offchain_uid(&m, uid);
    eth_sig sig;
    if (sig_sign(at->ctx, at->key, digest, &sig) != 0) {
        free(data);
        return 0;
    }
    char *p = t->out;
    p = PUT_LIT(p, "{\"levelId\":\"");
    p = put(p, t->f.level_id, t->f.level_id_len);
    p = PUT_LIT(p, "\",\"sig\":{\"version\":2,\"uid\":\"");
    p = put_hex32(p, uid);
    p = PUT_LIT(p, "\",\"domain\":");
    p = put(p, at->domain_json, at->domain_json_len);
    p = PUT_LIT(p, ",\"primaryType\":\"Attest\",\"types\":");
    p = put(p, types_json, sizeof types_json - 1);
    p = PUT_LIT(p, ",\"message\":{\"version\":2,\"schema\":\"");
    p = put(p, at->schema_hex, EAS_HEX32_SIZE - 1);
    p = PUT_LIT(p, "\",\"recipient\":\"");
    p = put(p, j->recipient_text, ADDRESS_STRING_SIZE - 1);
    p = PUT_LIT(p, "\",\"time\":");
    p = put_uint(p, m.time);
    p = PUT_LIT(p, ",\"expirationTime\":0,\"revocable\":true,\"refUID\":\"");
    p = put_hex32(p, m.ref_uid);
    p = PUT_LIT(p, "\",\"data\":\"0x");
    hex_encode(data, data_len, p);
    p += 2 * data_len;
    p = PUT_LIT(p, "\",\"salt\":\"");
    p = put_hex32(p, m.salt);
    p = PUT_LIT(p, "\"},\"signature\":{\"r\":\"");
    p = put_hex32(p, sig.r);
    p = PUT_LIT(p, "\",\"s\":\"");
    p = put_hex32(p, sig.s);
    p = PUT_LIT(p, "\",\"v\":");
    p = put_uint(p, 27u + (unsigned)sig.recid);
    p = PUT_LIT(p, "}},\"signer\":\"");
    p = put(p, at->signer, ADDRESS_STRING_SIZE - 1);
    p = PUT_LIT(p, "\"}");
    free(data);
    /* t->cap (render_cap) holds the fixed parts (about 1,100 bytes) with room to spare */
    return (size_t)(p - t->out);
}

static void work_sign(uv_work_t *w)
{
    job *j = w->data;
    pool_lower_priority();
    for (size_t i = 0; i < j->n; i++) {
        task *t = &j->tasks[i];
        t->item->json_len = sign_one(j->at, j, t);
        t->item->json = t->out;
    }
}

static void after_sign(uv_work_t *w, int status)
{
    job *j = w->data;
    attester *at = j->at;
    at->jobs_pending--;
    int rc = status == 0 ? 0 : -1;
    for (size_t i = 0; i < j->n; i++) {
        attest_item *it = j->tasks[i].item;
        if (status != 0 || !it->json_len) {
            rc = -1;
            continue;
        }
        at->signed_total++;
        attestcache_put(at->cache, it->key, it->key_len, it->json, it->json_len);
    }
    j->done(j->ctx, rc);
}

/* The cache key: every field the attestation signs (the domain separator stands for the chain,
 * the contract and its version; the schema is fixed), each after its length. The level name
 * enters as stored, a JSON string: one spelling per name. */
static char *cache_key(arena *pool, const attester *at, const char *entity_id, size_t id_len,
                       const char *name, size_t name_len, const char *recipient,
                       const attest_item *it, size_t *len)
{
    size_t n = 32 + 4 * 4 + id_len + name_len + it->level_id_len + it->level_name_json_len + 8 +
               ADDRESS_STRING_SIZE;
    char *k = arena_alloc(pool, n), *p = k;
    if (!k)
        return NULL;
    p = put(p, (const char *)at->domain, 32);
    const struct {
        const char *s;
        size_t n;
    } parts[] = {{entity_id, id_len},
                 {name, name_len},
                 {it->level_id, it->level_id_len},
                 {it->level_name_json, it->level_name_json_len}};
    for (size_t i = 0; i < 4; i++) {
        uint32_t l = (uint32_t)parts[i].n;
        p = put(p, (const char *)&l, 4);
        p = put(p, parts[i].s, parts[i].n);
    }
    uint64_t t = (uint64_t)(it->reached_at_ms / 1000);
    p = put(p, (const char *)&t, 8);
    p = put(p, recipient, ADDRESS_STRING_SIZE - 1);
    *len = (size_t)(p - k);
    return k;
}

/* The level's name as UTF-8 bytes, from its stored JSON string, into the pool. */
static bool decode_name(arena *pool, const attest_item *it, const char **out, size_t *len)
{
    json_error_t e;
    json_t *v = json_loadb(it->level_name_json, it->level_name_json_len, JSON_DECODE_ANY, &e);
    if (!v || !json_is_string(v)) {
        json_decref(v);
        return false;
    }
    *len = json_string_length(v);
    char *s = arena_alloc(pool, *len + 1);
    if (s)
        memcpy(s, json_string_value(v), *len);
    json_decref(v);
    *out = s;
    return s != NULL;
}

int attester_render(attester *at, uv_loop_t *loop, arena *pool, const char *entity_id,
                    const char *entity_name, size_t entity_name_len, const char *recipient,
                    attest_item *items, size_t n, void (*done)(void *ctx, int status), void *ctx)
{
    size_t id_len = strlen(entity_id), misses = 0;
    for (size_t i = 0; i < n; i++) {
        attest_item *it = &items[i];
        it->key = cache_key(pool, at, entity_id, id_len, entity_name, entity_name_len, recipient,
                            it, &it->key_len);
        if (!it->key)
            return -1;
        size_t len;
        const char *hit = attestcache_get(at->cache, it->key, it->key_len, &len);
        if (hit) {
            /* copied: a later put may evict it before this answer is assembled */
            char *copy = arena_alloc(pool, len);
            if (!copy)
                return -1;
            memcpy(copy, hit, len);
            it->json = copy, it->json_len = len;
        } else {
            it->json = NULL;
            misses++;
        }
    }
    if (!misses)
        return 1;
    job *j = arena_alloc(pool, sizeof *j);
    if (!j)
        return -1;
    memset(j, 0, sizeof *j);
    j->tasks = arena_alloc(pool, misses * sizeof *j->tasks);
    char *name = arena_alloc(pool, entity_name_len + 1);
    if (!j->tasks || !name)
        return -1;
    memcpy(name, entity_name, entity_name_len);
    j->at = at;
    j->done = done;
    j->ctx = ctx;
    address_parse(recipient, strlen(recipient), j->recipient);
    address_format_checksum(j->recipient, j->recipient_text);
    for (size_t i = 0; i < n; i++) {
        attest_item *it = &items[i];
        if (it->json)
            continue;
        task *t = &j->tasks[j->n++];
        t->item = it;
        t->f = (eas_level_fields){.entity_id = entity_id,
                                  .entity_id_len = id_len,
                                  .entity_name = name,
                                  .entity_name_len = entity_name_len,
                                  .level_id = it->level_id,
                                  .level_id_len = it->level_id_len,
                                  .reached_at = (uint64_t)(it->reached_at_ms / 1000)};
        if (!decode_name(pool, it, &t->f.level_name, &t->f.level_name_len))
            return -1;
        t->cap = render_cap(at, it->level_id_len, eas_level_data_size(&t->f));
        t->out = arena_alloc(pool, t->cap);
        if (!t->out)
            return -1;
    }
    j->work.data = j;
    if (uv_queue_work(loop, &j->work, work_sign, after_sign) != 0)
        return -1;
    at->jobs_total++;
    at->jobs_pending++;
    return 0;
}
