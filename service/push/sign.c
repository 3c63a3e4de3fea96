/* sign: Standard Webhooks signatures with nettle's HMAC-SHA256 and base64 (sign.h). */
#include "push/sign.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/base64.h>
#include <nettle/hmac.h>

#define SIGN_PREFIX     "whsec_"
#define SIGN_KEY_MAX    128
#define SIGN_SECRET_MAX (6 + BASE64_ENCODE_LENGTH(SIGN_KEY_MAX) + 4)

/* The key bytes of one "whsec_<base64>" text; 0 when it is not one. */
static size_t secret_key(const char *s, size_t len, uint8_t key[SIGN_KEY_MAX])
{
    size_t plen = strlen(SIGN_PREFIX);
    if (len <= plen || len > SIGN_SECRET_MAX || memcmp(s, SIGN_PREFIX, plen) != 0)
        return 0;
    struct base64_decode_ctx ctx;
    base64_decode_init(&ctx);
    size_t n = SIGN_KEY_MAX;
    if (!base64_decode_update(&ctx, &n, key, len - plen, s + plen) || !base64_decode_final(&ctx) ||
        n == 0)
        return 0;
    return n;
}

static int append_one(buf *out, bool sep, const uint8_t *key, size_t key_len, const char *msg_id,
                      size_t id_len, const char *ts, size_t ts_len, const char *body,
                      size_t body_len)
{
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, key_len, key);
    hmac_sha256_update(&h, id_len, (const uint8_t *)msg_id);
    hmac_sha256_update(&h, 1, (const uint8_t *)".");
    hmac_sha256_update(&h, ts_len, (const uint8_t *)ts);
    hmac_sha256_update(&h, 1, (const uint8_t *)".");
    hmac_sha256_update(&h, body_len, (const uint8_t *)body);
    uint8_t mac[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&h, sizeof mac, mac);
    char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
    base64_encode_raw(b64, sizeof mac, mac);
    if (sep && buf_append(out, " ", 1) != 0)
        return -1;
    if (buf_append_str(out, "v1,") != 0)
        return -1;
    return buf_append(out, b64, BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE));
}

int sign_header(buf *out, const char *secrets, size_t secrets_len, int64_t now_ms,
                const char *msg_id, size_t id_len, int64_t timestamp, const char *body,
                size_t body_len)
{
    /* Up to three words: the secret, the previous one and the previous one's end. */
    const char *w[3];
    size_t wl[3], nw = 0;
    const char *p = secrets, *end = secrets + secrets_len;
    while (p < end && nw < 3) {
        while (p < end && *p == ' ')
            p++;
        const char *q = p;
        while (q < end && *q != ' ')
            q++;
        if (q > p) {
            w[nw] = p;
            wl[nw++] = (size_t)(q - p);
        }
        p = q;
    }
    uint8_t key[SIGN_KEY_MAX];
    size_t key_len = nw ? secret_key(w[0], wl[0], key) : 0;
    if (!key_len)
        return -1;
    char ts[BUF_INT_SIZE];
    size_t ts_len = buf_format_int(ts, (long long)timestamp);
    size_t start = out->len;
    int rc = append_one(out, false, key, key_len, msg_id, id_len, ts, ts_len, body, body_len);
    if (rc == 0 && nw == 3) {
        char until[BUF_INT_SIZE];
        size_t ul = wl[2] < sizeof until ? wl[2] : sizeof until - 1;
        memcpy(until, w[2], ul);
        until[ul] = '\0';
        uint8_t old[SIGN_KEY_MAX];
        size_t old_len = secret_key(w[1], wl[1], old);
        if (old_len && now_ms < strtoll(until, NULL, 10))
            rc = append_one(out, true, old, old_len, msg_id, id_len, ts, ts_len, body, body_len);
        memset(old, 0, sizeof old);
    }
    memset(key, 0, sizeof key);
    if (rc != 0)
        out->len = start;
    return rc;
}
