/* ids: entity and skill ids, and client-chosen level ids. */
#include "core/ids.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>

int ids_new(char out[IDS_SIZE], char prefix)
{
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return -1;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, IDS_SIZE,
             "%c-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

bool ids_valid(const char *s, size_t len, char prefix)
{
    if (len != IDS_SIZE - 1 || s[0] != prefix || s[1] != '-')
        return false;
    const char *u = s + 2;
    for (size_t i = 0; i < 36; i++) {
        char ch = u[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (ch != '-')
                return false;
        } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
            return false;
        }
    }
    /* version 4, RFC 4122 variant */
    return u[14] == '4' && (u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b');
}

bool ids_valid_level(const char *s, size_t len)
{
    if (len < 1 || len > 64)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}
