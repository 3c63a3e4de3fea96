/* ISO 8601 date-times: UTC formatting with milliseconds and strict parsing with offsets. */
#ifndef ENTITYD_ISOTIME_H
#define ENTITYD_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" + NUL */
#define ISOTIME_STRING_SIZE 25
/* 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z in Unix milliseconds. */
#define ISOTIME_MIN_MS (-62167219200000LL)
#define ISOTIME_MAX_MS 253402300799999LL

/* Writes unix_ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" (proleptic Gregorian, UTC, NUL-terminated).
 * Values outside years 0000..9999 are clamped to ISOTIME_MIN_MS / ISOTIME_MAX_MS. */
void isotime_format(int64_t unix_ms, char out[ISOTIME_STRING_SIZE]);

/* Parses the len characters of s (need not be NUL-terminated) as
 * "YYYY-MM-DDTHH:MM:SS[.fraction]" followed by "Z", "+HH:MM", "-HH:MM", "+HHMM" or "-HHMM", and
 * stores the instant in UTC milliseconds (extra fraction digits truncated). Rejects out-of-range
 * fields, days past the end of the month (leap years included) and second 60. Returns 0, or -1
 * on any error; *unix_ms is written only on success. */
int isotime_parse(const char *s, size_t len, int64_t *unix_ms);

/* The wall clock in Unix milliseconds. */
int64_t isotime_now_ms(void);

#endif
