/* eas: EIP-712 typed-data hashing and the Ethereum Attestation Service's off-chain attestation
 * (version 2) of a level reached: the schema's ABI data, its UID, the Attest struct hash, the
 * off-chain UID and the deterministic salt. Pure functions over caller-owned buffers. */
#ifndef ENTITYD_EAS_H
#define ENTITYD_EAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The schema every level-reached attestation uses (CONTRACT §10). */
#define EAS_LEVEL_SCHEMA                                                                           \
    "string entityId,string entityName,string levelId,string levelName,uint64 reachedAt"
/* The name of the EAS EIP-712 domain. */
#define EAS_DOMAIN_NAME "EAS Attestation"
/* EAS's version-2 Attest type, as EIP-712 encodes it. */
#define EAS_ATTEST_TYPE                                                                            \
    "Attest(uint16 version,bytes32 schema,address recipient,uint64 time,uint64 expirationTime,"    \
    "bool revocable,bytes32 refUID,bytes data,bytes32 salt)"
/* "0x" + 64 hex + NUL */
#define EAS_HEX32_SIZE 67

/* EIP-712 domain separator of EIP712Domain(string name,string version,uint256 chainId,address
 * verifyingContract). */
void eip712_domain_separator(const char *name, size_t name_len, const char *version,
                             size_t version_len, uint64_t chain_id, const uint8_t contract[20],
                             uint8_t out[32]);

/* The digest a signer signs: keccak256(0x19 0x01 || domain separator || struct hash). */
void eip712_digest(const uint8_t domain_separator[32], const uint8_t struct_hash[32],
                   uint8_t out[32]);

/* A schema's UID as the EAS schema registry computes it:
 * keccak256(abi.encodePacked(schema, resolver, revocable)). */
void eas_schema_uid(const char *schema, size_t len, const uint8_t resolver[20], bool revocable,
                    uint8_t out[32]);

/* The facts of one level reached; strings are UTF-8 bytes as signed (not JSON-escaped). */
typedef struct eas_level_fields {
    const char *entity_id, *entity_name, *level_id, *level_name;
    size_t entity_id_len, entity_name_len, level_id_len, level_name_len;
    uint64_t reached_at;
} eas_level_fields;

/* Bytes of the ABI encoding of f (abi.encode of the schema's five fields). */
size_t eas_level_data_size(const eas_level_fields *f);
/* Writes that encoding to out, which holds eas_level_data_size(f) bytes; returns its length. */
size_t eas_level_data(const eas_level_fields *f, uint8_t *out);

/* keccak256 of the EIP712Domain type and of EAS_ATTEST_TYPE (32 bytes, static). */
const uint8_t *eip712_domain_type_hash(void);
const uint8_t *eas_attest_type_hash(void);

/* An off-chain attestation's message (version 2). data is borrowed; data_hash, when not NULL,
 * is keccak256(data) already computed (it enters both the salt and the struct hash). */
typedef struct eas_attest {
    uint8_t schema[32];
    uint8_t recipient[20];
    uint64_t time, expiration_time;
    bool revocable;
    uint8_t ref_uid[32];
    const uint8_t *data;
    size_t data_len;
    const uint8_t *data_hash;
    uint8_t salt[32];
} eas_attest;

/* hashStruct of the version-2 Attest message. */
void eas_attest_struct_hash(const eas_attest *m, uint8_t out[32]);

/* The off-chain UID as the EAS SDK computes it for version 2 (the schema UID enters as the
 * UTF-8 bytes of its lowercase "0x…" text, 66 bytes). */
void eas_offchain_uid(const eas_attest *m, uint8_t out[32]);

/* The secret salts derive from: keccak256("entityd attestation salt v1" || key), so a salt
 * reveals nothing of the key and every instance holding the key derives the same. */
void eas_salt_secret(const uint8_t key[32], uint8_t out[32]);

/* A salt derived from a secret and every other signed field, so the same facts give the same
 * UID everywhere the secret is known and different facts never share one:
 * keccak256(secret || chain id || contract || the message without its salt). */
void eas_salt(const uint8_t secret[32], uint64_t chain_id, const uint8_t contract[20],
              const eas_attest *m, uint8_t out[32]);

/* Writes "0x" + 64 lowercase hex digits + NUL. */
void eas_hex32(const uint8_t in[32], char out[EAS_HEX32_SIZE]);

#endif
