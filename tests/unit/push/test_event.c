/* event: a stream entry parsed from the bytes Redis sends, shown as a GET /events item and as a
 * webhook body (both parsed back as JSON), and event ids compared as numbers. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "push/event.h"

/* An XRANGE entry as Redis sends it, read by hiredis's own reader. */
static redisReply *entry(const char *id, const char *type, const char *actor, const char *data)
{
    char resp[2048];
    snprintf(
        resp, sizeof resp,
        "*2\r\n$%zu\r\n%s\r\n*8\r\n$4\r\ntype\r\n$%zu\r\n%s\r\n$2\r\nat\r\n$24\r\n"
        "2026-12-07T10:00:00.000Z\r\n$5\r\nactor\r\n$%zu\r\n%s\r\n$4\r\ndata\r\n$%zu\r\n%s\r\n",
        strlen(id), id, strlen(type), type, strlen(actor), actor, strlen(data), data);
    redisReader *r = redisReaderCreate();
    redisReaderFeed(r, resp, strlen(resp));
    void *out = NULL;
    assert_int_equal(redisReaderGetReply(r, &out), REDIS_OK);
    redisReaderFree(r);
    assert_non_null(out);
    return out;
}

static json_t *render(const event_view *ev, bool webhook)
{
    buf b = {0};
    if (webhook)
        event_render_webhook(&b, "c-7a0c1f62-8f0e-4b1e-9d3c-0b9f0d1b2c3d", ev);
    else
        event_render_item(&b, ev);
    json_error_t err;
    json_t *j = json_loadb(b.data, b.len, 0, &err);
    if (!j)
        fail_msg("not JSON (%s): %.*s", err.text, (int)b.len, b.data);
    buf_free(&b);
    return j;
}

static void test_item_and_webhook(void **state)
{
    (void)state;
    redisReply *r =
        entry("1765101600000-3", "level.reached", "0x2c7536e3605d9c16a7a3d7b1898e529396a65c23",
              "{\"member\":\"0x5aae\",\"level\":\"lv-1\"}");
    event_view ev;
    assert_true(event_parse(r, &ev));
    json_t *item = render(&ev, false);
    assert_string_equal(json_string_value(json_object_get(item, "id")), "1765101600000-3");
    assert_string_equal(json_string_value(json_object_get(item, "type")), "level.reached");
    assert_string_equal(json_string_value(json_object_get(json_object_get(item, "data"), "level")),
                        "lv-1");
    json_t *hook = render(&ev, true);
    json_t *d = json_object_get(hook, "data");
    assert_string_equal(json_string_value(json_object_get(hook, "type")), "level.reached");
    assert_string_equal(json_string_value(json_object_get(hook, "timestamp")),
                        "2026-12-07T10:00:00.000Z");
    assert_string_equal(json_string_value(json_object_get(d, "entityID")),
                        "c-7a0c1f62-8f0e-4b1e-9d3c-0b9f0d1b2c3d");
    assert_string_equal(json_string_value(json_object_get(d, "eventId")), "1765101600000-3");
    assert_string_equal(json_string_value(json_object_get(d, "member")), "0x5aae");
    assert_int_equal(json_object_size(d), 5);
    json_decref(item);
    json_decref(hook);
    freeReplyObject(r);
}

static void test_empty_and_broken_data(void **state)
{
    (void)state;
    static const char *const datas[] = {"{}", "not json", "[1]", ""};
    for (size_t i = 0; i < sizeof datas / sizeof datas[0]; i++) {
        redisReply *r = entry("5-0", "entity.updated", "", datas[i]);
        event_view ev;
        assert_true(event_parse(r, &ev));
        json_t *item = render(&ev, false), *hook = render(&ev, true);
        assert_true(json_is_null(json_object_get(item, "actor")));
        assert_int_equal(json_object_size(json_object_get(item, "data")), 0);
        assert_int_equal(json_object_size(json_object_get(hook, "data")), 3);
        json_decref(item);
        json_decref(hook);
        freeReplyObject(r);
    }
}

static void test_ids(void **state)
{
    (void)state;
    assert_true(event_id_valid("0-0", 3));
    assert_true(event_id_valid("18446744073709551615-18446744073709551615", 41));
    assert_false(event_id_valid("18446744073709551616-0", 22));
    assert_false(event_id_valid("12", 2));
    assert_false(event_id_valid("1-", 2));
    assert_false(event_id_valid("-1", 2));
    assert_false(event_id_valid("1-2-3", 5));
    assert_true(event_id_cmp("9-0", 3, "10-0", 4) < 0);
    assert_true(event_id_cmp("10-2", 4, "10-10", 5) < 0);
    assert_true(event_id_cmp("010-2", 5, "10-2", 4) == 0);
    assert_true(event_id_cmp("11-0", 4, "10-99", 5) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_item_and_webhook),
        cmocka_unit_test(test_empty_and_broken_data),
        cmocka_unit_test(test_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
