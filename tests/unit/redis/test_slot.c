/* slot: CRC16 and key slots against the vectors of the Redis Cluster specification, hash tags
 * by its rules, and the redirect errors a cluster node answers with. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "redis/slot.h"

static int slot_str(const char *key)
{
    return slot_of(key, strlen(key));
}

static void test_crc16_vectors(void **state)
{
    (void)state;
    /* The specification's check value, and the empty input. */
    assert_int_equal(slot_crc16("123456789", 9), 0x31C3);
    assert_int_equal(slot_crc16("", 0), 0);
    /* Bytes above 0x7f are taken unsigned. */
    assert_int_not_equal(slot_crc16("\xff", 1), slot_crc16("\x7f", 1));
}

static void test_known_slots(void **state)
{
    (void)state;
    /* Slots the Redis documentation shows (CLUSTER KEYSLOT, MOVED examples). */
    assert_int_equal(slot_str("foo"), 12182);
    assert_int_equal(slot_str("bar"), 5061);
    assert_int_equal(slot_str("somekey"), 11058);
    assert_int_equal(slot_str("foo{hash_tag}"), 2515);
    assert_int_equal(slot_str("123456789"), 12739);
}

static void test_hash_tags(void **state)
{
    (void)state;
    /* The specification's examples of which part is hashed. */
    assert_int_equal(slot_str("{user1000}.following"), slot_str("user1000"));
    assert_int_equal(slot_str("{user1000}.followers"), slot_str("user1000"));
    assert_int_equal(slot_str("foo{}{bar}"), slot_crc16("foo{}{bar}", 10) & 16383);
    assert_int_equal(slot_str("foo{{bar}}zap"), slot_str("{bar"));
    assert_int_equal(slot_str("foo{bar}{zap}"), slot_str("bar"));
    assert_int_equal(slot_str("foo{bar"), slot_crc16("foo{bar", 7) & 16383);
    /* Every key of an entity shares its slot; the alias and revocation keys need not. */
    const char *id = "c-00000000-0000-4000-8000-000000000000";
    int s = slot_str(id);
    assert_int_equal(s, 2330);
    assert_int_equal(slot_str("ent:{c-00000000-0000-4000-8000-000000000000}"), s);
    assert_int_equal(slot_str("ent:{c-00000000-0000-4000-8000-000000000000}:members:order"), s);
    assert_int_equal(slot_str("ent:{c-00000000-0000-4000-8000-000000000000}:prog:0xabc"), s);
    /* Binary keys: a NUL inside is hashed like any byte. */
    assert_int_equal(slot_of("a\0b", 3), slot_crc16("a\0b", 3) & 16383);
}

static void test_redirects(void **state)
{
    (void)state;
    char host[64];
    int slot = -1, port = -1;
    const char *m = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(slot_parse_error(m, strlen(m), &slot, host, sizeof host, &port),
                     SLOT_ERR_MOVED);
    assert_int_equal(slot, 3999);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6381);
    const char *a = "ASK 16383 ::1:7000";
    assert_int_equal(slot_parse_error(a, strlen(a), &slot, host, sizeof host, &port), SLOT_ERR_ASK);
    assert_int_equal(slot, 16383);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7000);
    const char *t = "TRYAGAIN Multiple keys request during rehashing of slot";
    assert_int_equal(slot_parse_error(t, strlen(t), &slot, host, sizeof host, &port),
                     SLOT_ERR_TRYAGAIN);
    const char *d = "CLUSTERDOWN The cluster is down";
    assert_int_equal(slot_parse_error(d, strlen(d), &slot, host, sizeof host, &port),
                     SLOT_ERR_DOWN);
    /* Malformed or foreign errors are plain answers, and leave the outputs alone. */
    const char *bad[] = {"MOVED 16384 127.0.0.1:1",
                         "MOVED 1 127.0.0.1",
                         "MOVED 1 :80",
                         "MOVED x 127.0.0.1:1",
                         "ASK 1 h:0",
                         "ASK 1 h:99999",
                         "MOVED 1 h:1x",
                         "ERR wrong type",
                         "NOSCRIPT No script",
                         "MOVED"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        slot = port = -7;
        assert_int_equal(slot_parse_error(bad[i], strlen(bad[i]), &slot, host, sizeof host, &port),
                         SLOT_ERR_OTHER);
        assert_int_equal(slot, -7);
    }
    /* A host longer than the buffer is refused, not cut. */
    char tiny[4];
    assert_int_equal(slot_parse_error(m, strlen(m), &slot, tiny, sizeof tiny, &port),
                     SLOT_ERR_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_vectors),
        cmocka_unit_test(test_known_slots),
        cmocka_unit_test(test_hash_tags),
        cmocka_unit_test(test_redirects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
