/* keyfile: a secp256k1 private key read from a file that only its owner may read. */
#ifndef ENTITYD_KEYFILE_H
#define ENTITYD_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#include <secp256k1.h>

/* Parses a key's text: 64 hex digits, "0x" optional, surrounded by any whitespace. Returns 0,
 * or -1 with a sentence in err (never quoting the text); key is written only on success. */
int keyfile_parse(const secp256k1_context *ctx, const char *text, size_t len, uint8_t key[32],
                  char *err, size_t err_len);

/* Reads the key in the file at path: refused (-1, a sentence naming the problem in err) when
 * the file cannot be read, is accessible to group or others, or does not hold a valid key.
 * Every copy of the text it read is wiped before it returns. */
int keyfile_load(const secp256k1_context *ctx, const char *path, uint8_t key[32], char *err,
                 size_t err_len);

/* Overwrites n bytes at p in a way the compiler may not drop. */
void keyfile_wipe(void *p, size_t n);

#endif
