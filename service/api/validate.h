/* validate: request bodies and fields checked against the contract's limits, each failure naming
 * its field ("ownerAddresses[2]"). */
#ifndef ENTITYD_VALIDATE_H
#define ENTITYD_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "http/request.h"

typedef struct verr {
    char field[96];
    char message[200];
} verr;

enum text_kind {
    TEXT_NAME,        /* trimmed, 1-100 characters */
    TEXT_DESCRIPTION, /* 0-5000 characters; \n and \t allowed */
    TEXT_SOCIAL,      /* trimmed, 0-200 characters */
    TEXT_URL,         /* trimmed, 0-2048 characters; absolute http(s) when not empty */
};

/* Parses the request body as a JSON object, or answers 400 invalid_json and returns NULL. The
 * caller owns the returned reference. */
json_t *validate_body(request *req);

/* Answers 400 invalid_request naming e's field. */
void validate_fail(request *req, const verr *e);

/* Checks a text value (a JSON string) of the kind; on success *out and *len view the (trimmed) text
 * inside `value`. Returns 0 or -1 with e filled; `field` names it in errors. */
int validate_text_value(json_t *value, const char *field, int kind, const char **out, size_t *len,
                        verr *e);
/* Reads obj[key] as text: 1 present, 0 absent (allowed when !required), -1 error. */
int validate_text(json_t *obj, const char *key, bool required, int kind, const char **out,
                  size_t *len, verr *e);
/* Reads obj[key] as a boolean: 1 present, 0 absent, -1 error. */
int validate_bool(json_t *obj, const char *key, bool *out, verr *e);
/* Reads obj[key] as an integer in [min, max]: 1 present, 0 absent, -1 error. */
int validate_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out, verr *e);

/* Reads an address list: a JSON array of address strings (or, with csv_ok, one string of
 * comma-separated addresses). Lowercased and deduplicated in first-seen order into `out`
 * (43-byte strings in the pool). Element errors name field[i]. Returns 0 or -1. */
int validate_addresses(arena *pool, json_t *value, const char *field, size_t min, size_t max,
                       bool csv_ok, char (**out)[43], size_t *n, verr *e);

/* Reads the required body[key] as an address list (validate_addresses, arrays only) into the
 * request's pool. Answers 400 itself and returns -1 when it is missing or invalid. */
int validate_address_field(request *req, json_t *body, const char *key, size_t min, size_t max,
                           char (**out)[43], size_t *n);

/* Checks one address string; writes the lowercase form. Returns 0 or -1 (e names field). */
int validate_address(const char *s, size_t len, const char *field, char out[43], verr *e);

/* Number of UTF-8 characters (code points) in valid UTF-8 text. */
size_t validate_utf8_chars(const char *s, size_t len);

#endif
