/* validate: request bodies and fields checked against the contract's limits. */
#include "api/validate.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "crypto/address.h"

json_t *validate_body(request *req)
{
    json_error_t jerr;
    if (req->body.len == 0) {
        request_fail(req, 400, "invalid_json", "The request body must be a JSON object.", NULL);
        return NULL;
    }
    json_t *body = json_loadb(req->body.data, req->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) {
        /* jansson's text may quote the offending bytes: keep it printable ASCII so the answer
         * stays valid UTF-8 whatever the body held. */
        char text[JSON_ERROR_TEXT_LENGTH];
        size_t i = 0;
        for (; jerr.text[i] && i + 1 < sizeof text; i++) {
            unsigned char ch = (unsigned char)jerr.text[i];
            text[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
        }
        text[i] = '\0';
        char msg[320];
        snprintf(msg, sizeof msg, "The request body is not valid JSON: %s (line %d, column %d).",
                 text, jerr.line, jerr.column);
        request_fail(req, 400, "invalid_json", msg, NULL);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        request_fail(req, 400, "invalid_json", "The request body must be a JSON object.", NULL);
        return NULL;
    }
    return body;
}

void validate_fail(request *req, const verr *e)
{
    request_fail(req, 400, "invalid_request", e->message, e->field);
}

static int err(verr *e, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message, "%s %s", field, message);
    return -1;
}

size_t validate_utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static bool valid_url(const char *s, size_t len)
{
    size_t skip;
    if (len >= 7 && !strncasecmp(s, "http://", 7))
        skip = 7;
    else if (len >= 8 && !strncasecmp(s, "https://", 8))
        skip = 8;
    else
        return false;
    if (len == skip || s[skip] == '/' || s[skip] == '?' || s[skip] == '#')
        return false; /* no host */
    for (size_t i = 0; i < len; i++)
        if (is_space(s[i]))
            return false;
    return true;
}

int validate_text_value(json_t *value, const char *field, int kind, const char **out, size_t *len,
                        verr *e)
{
    if (!json_is_string(value))
        return err(e, field, "must be a string.");
    const char *s = json_string_value(value);
    size_t n = json_string_length(value);
    if (kind != TEXT_DESCRIPTION) {
        while (n && is_space(*s)) {
            s++;
            n--;
        }
        while (n && is_space(s[n - 1]))
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool ctrl = ch < 0x20 || ch == 0x7f;
        if (ctrl && !(kind == TEXT_DESCRIPTION && (ch == '\n' || ch == '\t')))
            return err(e, field, "must not contain control characters.");
    }
    size_t chars = validate_utf8_chars(s, n);
    switch (kind) {
    case TEXT_NAME:
        if (chars < 1 || chars > 100)
            return err(e, field, "must be 1 to 100 characters (after trimming).");
        break;
    case TEXT_DESCRIPTION:
        if (chars > 5000)
            return err(e, field, "must be at most 5000 characters.");
        break;
    case TEXT_SOCIAL:
        if (chars > 200)
            return err(e, field, "must be at most 200 characters.");
        break;
    case TEXT_URL:
        if (chars > 2048)
            return err(e, field, "must be at most 2048 characters.");
        if (n && !valid_url(s, n))
            return err(e, field, "must be empty or an absolute http or https URL.");
        break;
    }
    *out = s;
    *len = n;
    return 0;
}

int validate_text(json_t *obj, const char *key, bool required, int kind, const char **out,
                  size_t *len, verr *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return err(e, key, "is required.");
        return 0;
    }
    return validate_text_value(v, key, kind, out, len, e) == 0 ? 1 : -1;
}

int validate_bool(json_t *obj, const char *key, bool *out, verr *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return err(e, key, "must be true or false.");
    *out = json_is_true(v);
    return 1;
}

int validate_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out, verr *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        char msg[120];
        snprintf(msg, sizeof msg, "must be an integer from %lld to %lld.", (long long)min,
                 (long long)max);
        return err(e, key, msg);
    }
    *out = json_integer_value(v);
    return 1;
}

int validate_address_field(request *req, json_t *body, const char *key, size_t min, size_t max,
                           char (**out)[43], size_t *n)
{
    verr e;
    json_t *list = json_object_get(body, key);
    if (!list) {
        err(&e, key, "is required.");
        validate_fail(req, &e);
        return -1;
    }
    if (validate_addresses(&req->pool, list, key, min, max, false, out, n, &e) != 0) {
        validate_fail(req, &e);
        return -1;
    }
    return 0;
}

int validate_address(const char *s, size_t len, const char *field, char out[43], verr *e)
{
    uint8_t a[20];
    int rc = address_parse(s, len, a);
    if (rc == ADDRESS_ECHECKSUM)
        return err(e, field, "fails its EIP-55 checksum (mixed case).");
    if (rc != ADDRESS_OK)
        return err(e, field, "must be an address: 0x followed by 40 hex digits.");
    address_format_lower(a, out);
    return 0;
}

static int add_unique(char (*list)[43], size_t *n, const char addr[43])
{
    for (size_t i = 0; i < *n; i++)
        if (!memcmp(list[i], addr, 42))
            return 0;
    memcpy(list[(*n)++], addr, 43);
    return 1;
}

int validate_addresses(arena *pool, json_t *value, const char *field, size_t min, size_t max,
                       bool csv_ok, char (**out)[43], size_t *n, verr *e)
{
    char f[96];
    char msg[120];
    *n = 0;
    if (csv_ok && json_is_string(value)) {
        const char *s = json_string_value(value);
        size_t len = json_string_length(value);
        size_t count = len ? 1 : 0;
        for (size_t i = 0; i < len; i++)
            count += s[i] == ',';
        if (count > max) {
            snprintf(msg, sizeof msg, "must hold at most %zu addresses.", max);
            return err(e, field, msg);
        }
        *out = arena_alloc(pool, (count ? count : 1) * sizeof **out);
        if (!*out)
            return err(e, field, "is too large.");
        size_t idx = 0;
        for (const char *p = s, *end = s + len; len && p <= end; idx++) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *stop = comma ? comma : end;
            const char *a = p;
            size_t alen = (size_t)(stop - p);
            while (alen && is_space(*a)) {
                a++;
                alen--;
            }
            while (alen && is_space(a[alen - 1]))
                alen--;
            char lower[43];
            snprintf(f, sizeof f, "%s[%zu]", field, idx);
            if (validate_address(a, alen, f, lower, e) != 0)
                return -1;
            add_unique(*out, n, lower);
            if (!comma)
                break;
            p = comma + 1;
        }
    } else if (json_is_array(value)) {
        size_t count = json_array_size(value);
        if (count > max) {
            snprintf(msg, sizeof msg, "must hold at most %zu addresses.", max);
            return err(e, field, msg);
        }
        *out = arena_alloc(pool, (count ? count : 1) * sizeof **out);
        if (!*out)
            return err(e, field, "is too large.");
        for (size_t i = 0; i < count; i++) {
            json_t *item = json_array_get(value, i);
            snprintf(f, sizeof f, "%s[%zu]", field, i);
            if (!json_is_string(item))
                return err(e, f, "must be an address string.");
            char lower[43];
            if (validate_address(json_string_value(item), json_string_length(item), f, lower, e) !=
                0)
                return -1;
            add_unique(*out, n, lower);
        }
    } else {
        return err(e, field,
                   csv_ok ? "must be an array of addresses or a comma-separated string."
                          : "must be an array of addresses.");
    }
    if (*n < min) {
        snprintf(msg, sizeof msg, "must hold at least %zu address%s.", min, min == 1 ? "" : "es");
        return err(e, field, msg);
    }
    return 0;
}
