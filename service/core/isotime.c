/* ISO 8601 date-times: UTC formatting with milliseconds and strict parsing with offsets. */
#include "core/isotime.h"

#include <time.h>

#define MS_PER_DAY 86400000LL

/* C division truncates toward zero; dates before 1970 need it to round down. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The well-known days_from_civil / civil_from_days algorithms: eras of 400 years starting in
 * March, so the leap day is the last day of its year and needs no special case. Pure integer
 * code keeps the result independent of the C library, TZ and locale. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;

    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

static void put_digits(char *out, int64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

void isotime_format(int64_t unix_ms, char out[ISOTIME_STRING_SIZE])
{
    int64_t y;
    int m, d;

    if (unix_ms < ISOTIME_MIN_MS) {
        unix_ms = ISOTIME_MIN_MS;
    } else if (unix_ms > ISOTIME_MAX_MS) {
        unix_ms = ISOTIME_MAX_MS;
    }
    int64_t days = floor_div(unix_ms, MS_PER_DAY);
    int64_t ms_of_day = unix_ms - days * MS_PER_DAY;

    civil_from_days(days, &y, &m, &d);
    put_digits(out, y, 4);
    out[4] = '-';
    put_digits(out + 5, m, 2);
    out[7] = '-';
    put_digits(out + 8, d, 2);
    out[10] = 'T';
    put_digits(out + 11, ms_of_day / 3600000, 2);
    out[13] = ':';
    put_digits(out + 14, ms_of_day / 60000 % 60, 2);
    out[16] = ':';
    put_digits(out + 17, ms_of_day / 1000 % 60, 2);
    out[19] = '.';
    put_digits(out + 20, ms_of_day % 1000, 3);
    out[23] = 'Z';
    out[24] = '\0';
}

/* Reads exactly n ASCII digits at s[*pos]; -1 if any is missing or not a digit. */
static int64_t read_digits(const char *s, size_t len, size_t *pos, int n)
{
    int64_t v = 0;

    if (len - *pos < (size_t)n) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char c = s[*pos + (size_t)i];
        if (c < '0' || c > '9') {
            return -1;
        }
        v = v * 10 + (c - '0');
    }
    *pos += (size_t)n;
    return v;
}

static int expect_char(const char *s, size_t len, size_t *pos, char c)
{
    if (*pos >= len || s[*pos] != c) {
        return -1;
    }
    (*pos)++;
    return 0;
}

int isotime_parse(const char *s, size_t len, int64_t *unix_ms)
{
    size_t pos = 0;
    int64_t year, month, day, hour, minute, second, ms = 0, offset_min = 0;

    if ((year = read_digits(s, len, &pos, 4)) < 0 || expect_char(s, len, &pos, '-') < 0 ||
        (month = read_digits(s, len, &pos, 2)) < 0 || expect_char(s, len, &pos, '-') < 0 ||
        (day = read_digits(s, len, &pos, 2)) < 0 || expect_char(s, len, &pos, 'T') < 0 ||
        (hour = read_digits(s, len, &pos, 2)) < 0 || expect_char(s, len, &pos, ':') < 0 ||
        (minute = read_digits(s, len, &pos, 2)) < 0 || expect_char(s, len, &pos, ':') < 0 ||
        (second = read_digits(s, len, &pos, 2)) < 0) {
        return -1;
    }
    if (pos < len && s[pos] == '.') {
        size_t start = ++pos;
        int64_t scale = 100;

        /* Digits past milliseconds are truncated, as JavaScript's Date does. */
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            ms += (s[pos] - '0') * scale;
            scale /= 10;
            pos++;
        }
        if (pos == start) {
            return -1;
        }
    }
    if (pos >= len) {
        return -1;
    }
    if (s[pos] == 'Z') {
        pos++;
    } else if (s[pos] == '+' || s[pos] == '-') {
        int sign = s[pos++] == '-' ? -1 : 1;
        int64_t oh, om;

        if ((oh = read_digits(s, len, &pos, 2)) < 0) {
            return -1;
        }
        if (pos < len && s[pos] == ':') {
            pos++;
        }
        if ((om = read_digits(s, len, &pos, 2)) < 0 || oh > 23 || om > 59) {
            return -1;
        }
        offset_min = sign * (oh * 60 + om);
    } else {
        return -1;
    }
    if (pos != len) {
        return -1;
    }
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, (int)month) || hour > 23 ||
        minute > 59 || second > 59) {
        return -1;
    }
    *unix_ms = days_from_civil(year, (int)month, (int)day) * MS_PER_DAY +
               ((hour * 60 + minute - offset_min) * 60 + second) * 1000 + ms;
    return 0;
}

int64_t isotime_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
