/* listfield: list-valued body fields in the forms the contract accepts. */
#include "api/listfield.h"

#include <stdio.h>
#include <string.h>

static json_t *fail(verr *e, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message, "%s %s", field, message);
    return NULL;
}

static json_t *split_csv(const char *s, size_t len)
{
    json_t *arr = json_array();
    size_t start = 0;
    while (len) {
        size_t end = start;
        while (end < len && s[end] != ',')
            end++;
        size_t a = start, b = end;
        while (a < b && (s[a] == ' ' || s[a] == '\t'))
            a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
            b--;
        json_array_append_new(arr, json_stringn(s + a, b - a));
        if (end >= len)
            break;
        start = end + 1;
    }
    return arr;
}

json_t *listfield_array(json_t *v, const char *field, bool csv_ok, verr *e)
{
    if (json_is_array(v))
        return json_incref(v);
    if (!json_is_string(v))
        return fail(e, field,
                    csv_ok ? "must be an array, a string holding a JSON array, or a "
                             "comma-separated string."
                           : "must be an array or a string holding a JSON array.");
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    json_t *parsed = json_loadb(s, len, JSON_DECODE_ANY, NULL);
    if (json_is_array(parsed))
        return parsed;
    json_decref(parsed);
    if (!csv_ok)
        return fail(e, field, "must be an array or a string holding a JSON array.");
    return split_csv(s, len);
}

int listfield_uint(json_t *item, const char *field, size_t i, int64_t max, int64_t *out, verr *e)
{
    char f[96];
    snprintf(f, sizeof f, "%s[%zu]", field, i);
    int64_t v = -1;
    if (json_is_integer(item)) {
        v = json_integer_value(item);
    } else if (json_is_string(item)) {
        const char *s = json_string_value(item);
        size_t n = json_string_length(item);
        if (n >= 1 && n <= 16) {
            v = 0;
            for (size_t k = 0; k < n && v >= 0; k++)
                v = s[k] >= '0' && s[k] <= '9' ? v * 10 + (s[k] - '0') : -1;
        }
    }
    if (v < 0 || v > max) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be an integer from 0 to %lld.", (long long)max);
        fail(e, f, msg);
        return -1;
    }
    *out = v;
    return 0;
}
