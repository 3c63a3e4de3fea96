/* Access to tests/fixtures/eth_vectors.json for the crypto unit tests. */
#ifndef ENTITYD_TEST_FIXTURE_H
#define ENTITYD_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Loads the fixture named by argv[1] and returns it (owned by the caller); exits with a message
 * when it is missing or unreadable, so a test cannot pass without its vectors. */
json_t *fixture_load(int argc, char **argv);

/* The object member key of obj as a string; aborts the test if absent or not a string. */
const char *fixture_str(const json_t *obj, const char *key);

/* The member key of obj as an array / integer; aborts the test if absent or of another type. */
json_t *fixture_array(const json_t *obj, const char *key);
int64_t fixture_int(const json_t *obj, const char *key);

/* Decodes a hex string (optional "0x") into a malloc'ed buffer (caller frees; never NULL, one
 * spare byte so empty inputs still allocate) and stores its length in *len. Deliberately
 * independent of the hex module under test. Aborts the test on malformed input. */
uint8_t *fixture_hex(const char *hex, size_t *len);

/* Like fixture_hex for a known length: aborts unless hex decodes to exactly len bytes. */
void fixture_hex_exact(const char *hex, uint8_t *out, size_t len);

#endif
