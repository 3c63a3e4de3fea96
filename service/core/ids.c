/* ids: entity and skill ids, and client-chosen level ids. */
#include "core/ids.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

/* Randomness is drawn from the kernel a pool at a time, not one getrandom call per id: a pool
 * in memory is no easier to guess than a seeded generator's state would be. A fork empties the
 * pool (in the child), so that no two processes ever hand out the same bytes. */
#define IDS_POOL 512

static _Thread_local struct {
    uint8_t bytes[IDS_POOL];
    size_t used; /* bytes[used..] are unread; IDS_POOL: empty */
} ids_pool = {.used = IDS_POOL};
static pthread_once_t ids_once = PTHREAD_ONCE_INIT;

static void ids_forget_pool(void)
{
    memset(ids_pool.bytes, 0, sizeof ids_pool.bytes);
    ids_pool.used = IDS_POOL;
}

static void ids_register_fork(void)
{
    pthread_atfork(NULL, NULL, ids_forget_pool);
}

static int ids_random(uint8_t *out, size_t n)
{
    pthread_once(&ids_once, ids_register_fork);
    if (IDS_POOL - ids_pool.used < n) {
        if (getrandom(ids_pool.bytes, IDS_POOL, 0) != (ssize_t)IDS_POOL)
            return -1;
        ids_pool.used = 0;
    }
    memcpy(out, ids_pool.bytes + ids_pool.used, n);
    /* read bytes do not stay behind in memory */
    memset(ids_pool.bytes + ids_pool.used, 0, n);
    ids_pool.used += n;
    return 0;
}

int ids_new(char out[IDS_SIZE], char prefix)
{
    static const char hexd[] = "0123456789abcdef";
    uint8_t b[16];
    if (ids_random(b, sizeof b) != 0)
        return -1;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    char *p = out;
    *p++ = prefix;
    *p++ = '-';
    for (size_t i = 0; i < sizeof b; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hexd[b[i] >> 4];
        *p++ = hexd[b[i] & 15];
    }
    *p = '\0';
    return 0;
}

/* Each byte's class in a UUID: 'h' a lowercase hex digit, '-' the dash, '.' anything else. A
 * look-up a byte, no branch: ids in paths and bodies are checked on every request. */
static const char ids_class[257] = "................" /* 00 */
                                   "................" /* 10 */
                                   ".............-.." /* 20 */
                                   "hhhhhhhhhh......" /* 30 */
                                   "................" /* 40 */
                                   "................" /* 50 */
                                   ".hhhhhh........." /* 60 */
                                   "................" /* 70 */
                                   "................" /* 80 */
                                   "................" /* 90 */
                                   "................" /* a0 */
                                   "................" /* b0 */
                                   "................" /* c0 */
                                   "................" /* d0 */
                                   "................" /* e0 */
                                   "................" /* f0 */;

bool ids_valid(const char *s, size_t len, char prefix)
{
    static const char shape[] = "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh";
    if (len != IDS_SIZE - 1 || s[0] != prefix || s[1] != '-')
        return false;
    const char *u = s + 2;
    unsigned bad = 0;
    for (size_t i = 0; i < 36; i++)
        bad |= (unsigned char)(ids_class[(unsigned char)u[i]] ^ shape[i]);
    if (bad)
        return false;
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
