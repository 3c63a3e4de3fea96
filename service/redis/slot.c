/* slot: the Redis Cluster hash slot of a key.
 *
 * Bitwise rather than table-driven: a slot is computed once per command in cluster mode, over
 * a hash tag of some forty bytes, which costs less than the command's own framing. */
#include "redis/slot.h"

#include <string.h>

uint16_t slot_crc16(const char *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)(unsigned char)p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int slot_of(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            key = open + 1, len = (size_t)(close - open - 1);
    }
    return slot_crc16(key, len) & (SLOT_COUNT - 1);
}

/* "<slot> <host>:<port>", the host being everything before the last ':' (an IPv6 address has
 * colons of its own). */
static int parse_target(const char *p, const char *end, int *slot, char *host, size_t host_size,
                        int *port)
{
    int s = 0, digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 6)
        s = s * 10 + (*p++ - '0'), digits++;
    if (!digits || s >= SLOT_COUNT || p >= end || *p++ != ' ')
        return -1;
    const char *colon = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ':')
            colon = q;
    if (!colon || colon == p || (size_t)(colon - p) >= host_size || colon + 1 >= end)
        return -1;
    int pt = 0;
    for (const char *q = colon + 1; q < end; q++) {
        if (*q < '0' || *q > '9' || pt > 65535)
            return -1;
        pt = pt * 10 + (*q - '0');
    }
    if (pt < 1 || pt > 65535)
        return -1;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    *slot = s;
    *port = pt;
    return 0;
}

static int starts(const char *str, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && !memcmp(str, word, n);
}

int slot_parse_error(const char *str, size_t len, int *slot, char *host, size_t host_size,
                     int *port)
{
    const char *end = str + len;
    if (starts(str, len, "MOVED "))
        return parse_target(str + 6, end, slot, host, host_size, port) ? SLOT_ERR_OTHER
                                                                       : SLOT_ERR_MOVED;
    if (starts(str, len, "ASK "))
        return parse_target(str + 4, end, slot, host, host_size, port) ? SLOT_ERR_OTHER
                                                                       : SLOT_ERR_ASK;
    if (starts(str, len, "TRYAGAIN"))
        return SLOT_ERR_TRYAGAIN;
    if (starts(str, len, "CLUSTERDOWN"))
        return SLOT_ERR_DOWN;
    return SLOT_ERR_OTHER;
}
