/* Access to tests/fixtures/eth_vectors.json for the crypto unit tests. */
#include "fixture.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

json_t *fixture_load(int argc, char **argv)
{
    json_error_t err;
    json_t *root;

    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/eth_vectors.json\n", argv[0]);
        exit(2);
    }
    root = json_load_file(argv[1], 0, &err);
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "%s: cannot load fixture %s: %s (line %d)\n", argv[0], argv[1], err.text,
                err.line);
        exit(2);
    }
    return root;
}

const char *fixture_str(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_string(v)) {
        fail_msg("fixture member '%s' missing or not a string", key);
    }
    return json_string_value(v);
}

json_t *fixture_array(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_array(v)) {
        fail_msg("fixture member '%s' missing or not an array", key);
    }
    return v;
}

int64_t fixture_int(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_integer(v)) {
        fail_msg("fixture member '%s' missing or not an integer", key);
    }
    return (int64_t)json_integer_value(v);
}

static int nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

uint8_t *fixture_hex(const char *hex, size_t *len)
{
    size_t n;
    uint8_t *out;

    if (hex[0] == '0' && hex[1] == 'x') {
        hex += 2;
    }
    n = strlen(hex);
    if (n % 2 != 0) {
        fail_msg("odd-length hex in fixture");
    }
    out = malloc(n / 2 + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n / 2; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            fail_msg("bad hex in fixture");
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    *len = n / 2;
    return out;
}

void fixture_hex_exact(const char *hex, uint8_t *out, size_t len)
{
    size_t n;
    uint8_t *b = fixture_hex(hex, &n);

    assert_int_equal(n, len);
    memcpy(out, b, len);
    free(b);
}
