/* slotset: an entry is found under its key only; a key whose pair is full replaces the one used
 * longer ago and leaves the other; the same key replaces itself; making room empties slots
 * after the hand until the bytes fit, and says when 64 slots were not enough; clear and fini
 * hand every entry to the owner's drop exactly once. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/slotset.h"

typedef struct item {
    slotset_head head;
    size_t size;
    char key[32];
} item;

typedef struct owner {
    size_t bytes, drops;
} owner;

static bool same(const slotset_head *h, const char *key, size_t len)
{
    const item *it = (const item *)h;
    return strlen(it->key) == len && memcmp(it->key, key, len) == 0;
}

static void drop(void *o, slotset_head **slot)
{
    owner *ow = o;
    item *it = (item *)*slot;
    ow->bytes -= it->size;
    ow->drops++;
    free(it);
    *slot = NULL;
}

/* Stores `key` of `size` bytes within `max` the way the caches do: claim, make room, fill. */
static bool put(slotset *s, owner *ow, const char *key, size_t size, size_t max)
{
    uint64_t h = slotset_hash(key, strlen(key));
    slotset_head **slot = slotset_claim(s, h, key, strlen(key), same, drop, ow);
    if (!slotset_make_room(s, &ow->bytes, size, max, drop, ow))
        return false;
    item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->head.hash = h;
    it->size = size;
    snprintf(it->key, sizeof it->key, "%s", key);
    slotset_touch(s, &it->head);
    *slot = &it->head;
    ow->bytes += size;
    return true;
}

static item *get(slotset *s, const char *key)
{
    slotset_head **slot = slotset_find(s, slotset_hash(key, strlen(key)), key, strlen(key), same);
    if (!slot)
        return NULL;
    slotset_touch(s, *slot);
    return (item *)*slot;
}

/* Three keys whose hashes name the same pair of a 64-slot set. */
static void same_pair(const slotset *s, char out[3][32])
{
    size_t want = SIZE_MAX;
    int n = 0;
    for (int i = 0; n < 3 && i < 1000000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%d", i);
        size_t pair = (slotset_hash(k, strlen(k)) & (s->nslots - 1)) >> 1;
        if (want == SIZE_MAX)
            want = pair;
        if (pair == want)
            snprintf(out[n++], 32, "%s", k);
    }
    assert_int_equal(n, 3);
}

static void test_found_under_its_key_only(void **state)
{
    (void)state;
    slotset s;
    owner ow = {0};
    assert_int_equal(slotset_init(&s, 0, 1024, 1 << 10), 0);
    assert_int_equal(s.nslots, 64);
    assert_true(put(&s, &ow, "alpha", 10, 1000));
    assert_true(put(&s, &ow, "beta", 10, 1000));
    assert_non_null(get(&s, "alpha"));
    assert_string_equal(get(&s, "beta")->key, "beta");
    assert_null(get(&s, "alph"));
    assert_null(get(&s, "gamma"));
    /* The same key again replaces itself: one entry, its bytes once. */
    assert_true(put(&s, &ow, "alpha", 30, 1000));
    assert_int_equal(ow.bytes, 40);
    assert_int_equal(ow.drops, 1);
    slotset_fini(&s, drop, &ow);
    assert_int_equal(ow.bytes, 0);
    assert_int_equal(ow.drops, 3);
    assert_null(s.slots);
}

static void test_full_pair_replaces_the_one_used_longer_ago(void **state)
{
    (void)state;
    slotset s;
    owner ow = {0};
    char k[3][32];
    assert_int_equal(slotset_init(&s, 0, 1024, 1 << 10), 0);
    same_pair(&s, k);
    assert_true(put(&s, &ow, k[0], 1, 1000));
    assert_true(put(&s, &ow, k[1], 1, 1000));
    assert_non_null(get(&s, k[0])); /* k[1] is now the one used longer ago */
    assert_true(put(&s, &ow, k[2], 1, 1000));
    assert_non_null(get(&s, k[0]));
    assert_null(get(&s, k[1]));
    assert_non_null(get(&s, k[2]));
    assert_int_equal(ow.drops, 1);
    slotset_fini(&s, drop, &ow);
    assert_int_equal(ow.drops, 3);
}

static void test_make_room_keeps_the_budget(void **state)
{
    (void)state;
    slotset s;
    owner ow = {0};
    assert_int_equal(slotset_init(&s, 0, 1024, 1 << 10), 0); /* 64 slots: one scan sees all */
    size_t most = 0;
    for (int i = 0; i < 5000; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        assert_true(put(&s, &ow, key, 500, 10000));
        assert_true(ow.bytes <= 10000);
        most = ow.bytes > most ? ow.bytes : most;
    }
    assert_int_equal(most, 10000); /* filled to the budget, not emptied all at once */
    assert_non_null(get(&s, "k4999"));
    /* More over the budget than every slot holds: not made, and said so. */
    assert_false(slotset_make_room(&s, &ow.bytes, 10001, 10000, drop, &ow));
    assert_int_equal(ow.bytes, 0);
    assert_true(put(&s, &ow, "again", 500, 10000));
    slotset_clear(&s, drop, &ow);
    assert_int_equal(ow.bytes, 0);
    assert_null(get(&s, "again"));
    slotset_fini(&s, drop, &ow);
}

static void test_slots_follow_the_budget(void **state)
{
    (void)state;
    slotset s;
    owner ow = {0};
    assert_int_equal(slotset_init(&s, 1 << 30, 1024, 1 << 12), 0);
    assert_int_equal(s.nslots, 1 << 12); /* capped */
    slotset_fini(&s, drop, &ow);
    assert_int_equal(slotset_init(&s, 100 * 1024, 1024, 1 << 12), 0);
    assert_int_equal(s.nslots, 128); /* the power of two at or over budget / bytes per slot */
    slotset_fini(&s, drop, &ow);
    assert_int_equal(ow.drops, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_under_its_key_only),
        cmocka_unit_test(test_full_pair_replaces_the_one_used_longer_ago),
        cmocka_unit_test(test_make_room_keeps_the_budget),
        cmocka_unit_test(test_slots_follow_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
