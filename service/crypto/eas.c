/* eas: EIP-712 hashing and EAS off-chain attestations (version 2), over keccak.c. */
#include "crypto/eas.h"

#include <string.h>

#include "crypto/hex.h"
#include "crypto/keccak.h"

/* keccak256 of the EIP712Domain type (name, version, chainId, verifyingContract) and of
 * EAS_ATTEST_TYPE: constants (test_eas checks them). */
static const uint8_t domain_type_hash[32] = {
    0x8b, 0x73, 0xc3, 0xc6, 0x9b, 0xb8, 0xfe, 0x3d, 0x51, 0x2e, 0xcc, 0x4c, 0xf7, 0x59, 0xcc, 0x79,
    0x23, 0x9f, 0x7b, 0x17, 0x9b, 0x0f, 0xfa, 0xca, 0xa9, 0xa7, 0x5d, 0x52, 0x2b, 0x39, 0x40, 0x0f};
static const uint8_t attest_type_hash[32] = {
    0x25, 0x8b, 0x75, 0x7f, 0xc3, 0x7a, 0x66, 0x99, 0xa9, 0x84, 0xf4, 0xbe, 0x01, 0x25, 0x81, 0x22,
    0xf8, 0x34, 0x20, 0x03, 0x74, 0xb3, 0x4b, 0x44, 0x57, 0xb6, 0xdb, 0x0d, 0xd0, 0xf7, 0x11, 0x32};

const uint8_t *eip712_domain_type_hash(void)
{
    return domain_type_hash;
}

const uint8_t *eas_attest_type_hash(void)
{
    return attest_type_hash;
}

/* keccak256(data), or the hash the caller gave. */
static const uint8_t *data_hash(const eas_attest *m, uint8_t buf[32])
{
    if (m->data_hash)
        return m->data_hash;
    keccak256(m->data, m->data_len, buf);
    return buf;
}

/* A 32-byte ABI word holding an unsigned integer, big-endian, left-padded with zeros. */
static void word_uint(uint64_t v, uint8_t w[32])
{
    memset(w, 0, 32);
    for (int i = 0; i < 8; i++)
        w[31 - i] = (uint8_t)(v >> (8 * i));
}

static void word_address(const uint8_t a[20], uint8_t w[32])
{
    memset(w, 0, 12);
    memcpy(w + 12, a, 20);
}

static void update_uint(struct keccak256_ctx *k, uint64_t v)
{
    uint8_t w[32];
    word_uint(v, w);
    keccak256_update(k, w, 32);
}

static void be_bytes(uint64_t v, uint8_t *out, int n)
{
    for (int i = 0; i < n; i++)
        out[n - 1 - i] = (uint8_t)(v >> (8 * i));
}

void eip712_domain_separator(const char *name, size_t name_len, const char *version,
                             size_t version_len, uint64_t chain_id, const uint8_t contract[20],
                             uint8_t out[32])
{
    uint8_t h[32], w[32];
    struct keccak256_ctx k;
    keccak256_init(&k);
    keccak256_update(&k, domain_type_hash, 32);
    keccak256(name, name_len, h);
    keccak256_update(&k, h, 32);
    keccak256(version, version_len, h);
    keccak256_update(&k, h, 32);
    update_uint(&k, chain_id);
    word_address(contract, w);
    keccak256_update(&k, w, 32);
    keccak256_final(&k, out);
}

void eip712_digest(const uint8_t domain_separator[32], const uint8_t struct_hash[32],
                   uint8_t out[32])
{
    uint8_t in[66] = {0x19, 0x01};
    memcpy(in + 2, domain_separator, 32);
    memcpy(in + 34, struct_hash, 32);
    keccak256(in, sizeof in, out);
}

void eas_schema_uid(const char *schema, size_t len, const uint8_t resolver[20], bool revocable,
                    uint8_t out[32])
{
    struct keccak256_ctx k;
    uint8_t flag = revocable ? 1 : 0;
    keccak256_init(&k);
    keccak256_update(&k, schema, len);
    keccak256_update(&k, resolver, 20);
    keccak256_update(&k, &flag, 1);
    keccak256_final(&k, out);
}

static size_t padded(size_t n)
{
    return (n + 31) / 32 * 32;
}

size_t eas_level_data_size(const eas_level_fields *f)
{
    /* five head words, then each string's length word and its padded bytes */
    return 5 * 32 + 4 * 32 + padded(f->entity_id_len) + padded(f->entity_name_len) +
           padded(f->level_id_len) + padded(f->level_name_len);
}

size_t eas_level_data(const eas_level_fields *f, uint8_t *out)
{
    const char *s[4] = {f->entity_id, f->entity_name, f->level_id, f->level_name};
    size_t n[4] = {f->entity_id_len, f->entity_name_len, f->level_id_len, f->level_name_len};
    size_t size = eas_level_data_size(f), tail = 5 * 32;
    memset(out, 0, size);
    for (int i = 0; i < 4; i++) {
        word_uint(tail, out + 32 * i); /* the offset of string i, from the start */
        word_uint(n[i], out + tail);
        if (n[i])
            memcpy(out + tail + 32, s[i], n[i]);
        tail += 32 + padded(n[i]);
    }
    word_uint(f->reached_at, out + 4 * 32);
    return size;
}

void eas_attest_struct_hash(const eas_attest *m, uint8_t out[32])
{
    uint8_t h[32], w[32];
    struct keccak256_ctx k;
    keccak256_init(&k);
    keccak256_update(&k, attest_type_hash, 32);
    update_uint(&k, 2);
    keccak256_update(&k, m->schema, 32);
    word_address(m->recipient, w);
    keccak256_update(&k, w, 32);
    update_uint(&k, m->time);
    update_uint(&k, m->expiration_time);
    update_uint(&k, m->revocable ? 1 : 0);
    keccak256_update(&k, m->ref_uid, 32);
    keccak256_update(&k, data_hash(m, h), 32); /* EIP-712: a bytes member is its hash */
    keccak256_update(&k, m->salt, 32);
    keccak256_final(&k, out);
}

void eas_offchain_uid(const eas_attest *m, uint8_t out[32])
{
    char schema_hex[EAS_HEX32_SIZE];
    uint8_t b[20 + 20 + 8 + 8 + 1];
    struct keccak256_ctx k;
    eas_hex32(m->schema, schema_hex);
    keccak256_init(&k);
    uint8_t version[2] = {0, 2};
    keccak256_update(&k, version, 2);
    keccak256_update(&k, schema_hex, EAS_HEX32_SIZE - 1);
    memcpy(b, m->recipient, 20);
    memset(b + 20, 0, 20); /* the attester: always the zero address off-chain */
    be_bytes(m->time, b + 40, 8);
    be_bytes(m->expiration_time, b + 48, 8);
    b[56] = m->revocable ? 1 : 0;
    keccak256_update(&k, b, sizeof b);
    keccak256_update(&k, m->ref_uid, 32);
    keccak256_update(&k, m->data, m->data_len);
    keccak256_update(&k, m->salt, 32);
    uint8_t bump[4] = {0};
    keccak256_update(&k, bump, 4);
    keccak256_final(&k, out);
}

void eas_salt_secret(const uint8_t key[32], uint8_t out[32])
{
    static const char label[] = "entityd attestation salt v1";
    struct keccak256_ctx k;
    keccak256_init(&k);
    keccak256_update(&k, label, sizeof label - 1);
    keccak256_update(&k, key, 32);
    keccak256_final(&k, out);
    /* the context held key bytes in its state */
    explicit_bzero(&k, sizeof k);
}

void eas_salt(const uint8_t secret[32], uint64_t chain_id, const uint8_t contract[20],
              const eas_attest *m, uint8_t out[32])
{
    uint8_t h[32];
    struct keccak256_ctx k;
    keccak256_init(&k);
    keccak256_update(&k, secret, 32);
    update_uint(&k, chain_id);
    keccak256_update(&k, contract, 20);
    keccak256_update(&k, m->schema, 32);
    keccak256_update(&k, m->recipient, 20);
    update_uint(&k, m->time);
    update_uint(&k, m->expiration_time);
    update_uint(&k, m->revocable ? 1 : 0);
    keccak256_update(&k, m->ref_uid, 32);
    keccak256_update(&k, data_hash(m, h), 32);
    keccak256_final(&k, out);
}

void eas_hex32(const uint8_t in[32], char out[EAS_HEX32_SIZE])
{
    out[0] = '0';
    out[1] = 'x';
    hex_encode(in, 32, out + 2);
}
