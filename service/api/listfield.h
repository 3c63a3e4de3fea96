/* listfield: list-valued body fields in the forms the contract accepts: a JSON array, a string
 * holding a JSON array, or (where allowed) a comma-separated string. */
#ifndef ENTITYD_LISTFIELD_H
#define ENTITYD_LISTFIELD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/validate.h"

/* Normalizes v into a new JSON array (caller releases it). With csv_ok a string that is not a
 * JSON array is split on commas (pieces trimmed, kept as strings; "" is an empty list). Returns
 * NULL with e filled (naming field) when v has none of the accepted forms. */
json_t *listfield_array(json_t *v, const char *field, bool csv_ok, verr *e);

/* Reads element i of a list as an integer in [0, max]: a JSON integer or a string of decimal
 * digits. Returns 0 or -1 with e naming field[i]. */
int listfield_uint(json_t *item, const char *field, size_t i, int64_t max, int64_t *out, verr *e);

#endif
