/* entityd-bench-webhook-floor: the floor of webhook delivery, a bare libcurl client sending the
 * same signed POSTs a delivery sends (Standard Webhooks headers, HMAC-SHA256 with nettle, a
 * body shaped as a delivery's), one after another on one kept-alive connection, to one
 * receiver; prints "posts <n> seconds <s> per_second <r> non_2xx <n>".
 *
 * usage: entityd-bench-webhook-floor URL COUNT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <nettle/base64.h>
#include <nettle/hmac.h>

static size_t discard(char *p, size_t size, size_t n, void *data)
{
    (void)p, (void)data;
    return size * n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[2]) <= 0) {
        fprintf(stderr, "usage: %s URL COUNT\n", argv[0]);
        return 2;
    }
    int count = atoi(argv[2]), bad = 0;
    /* A fixed 32-byte key, as a whsec_ secret decodes to. */
    static const uint8_t key[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    if (!c)
        return 1;
    curl_easy_setopt(c, CURLOPT_URL, argv[1]);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    double start = now_s();
    for (int i = 0; i < count; i++) {
        char body[512], id[128], ts[32], signed_text[1024], sig_hdr[128], id_hdr[160], ts_hdr[64];
        long long ms = (long long)time(NULL) * 1000;
        snprintf(id, sizeof id, "c-00000000-0000-4000-8000-000000000000:%lld-%d", ms, i);
        int blen = snprintf(
            body, sizeof body,
            "{\"type\":\"contribution.added\",\"timestamp\":\"2026-12-07T00:00:00.000Z\","
            "\"data\":{\"entityID\":\"c-00000000-0000-4000-8000-000000000000\","
            "\"eventId\":\"%lld-%d\",\"actor\":\"0x2c7536e3605d9c16a7a3d7b1898e529396a65c23\","
            "\"id\":\"k-00000000-0000-4000-8000-000000000000\",\"member\":"
            "\"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed\",\"xp\":0}}",
            ms, i);
        snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
        int slen = snprintf(signed_text, sizeof signed_text, "%s.%s.%s", id, ts, body);
        struct hmac_sha256_ctx h;
        uint8_t mac[SHA256_DIGEST_SIZE];
        hmac_sha256_set_key(&h, sizeof key, key);
        hmac_sha256_update(&h, (size_t)slen, (const uint8_t *)signed_text);
        hmac_sha256_digest(&h, sizeof mac, mac);
        char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
        base64_encode_raw(b64, sizeof mac, mac);
        b64[sizeof b64 - 1] = '\0';
        snprintf(sig_hdr, sizeof sig_hdr, "webhook-signature: v1,%s", b64);
        snprintf(id_hdr, sizeof id_hdr, "webhook-id: %s", id);
        snprintf(ts_hdr, sizeof ts_hdr, "webhook-timestamp: %s", ts);
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        hdr = curl_slist_append(hdr, id_hdr);
        hdr = curl_slist_append(hdr, ts_hdr);
        hdr = curl_slist_append(hdr, sig_hdr);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)blen);
        long code = 0;
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code / 100 != 2)
            bad++;
        curl_slist_free_all(hdr);
    }
    double secs = now_s() - start;
    printf("posts %d seconds %.3f per_second %.0f non_2xx %d\n", count, secs, count / secs, bad);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return bad ? 1 : 0;
}
