/* send: one delivery attempt (webhook.h): the Standard Webhooks POST of an event to its
 * endpoint over the loop's HTTP client, and its outcome recorded by wh_result.lua. */
#include "push/send.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/isotime.h"
#include "core/log.h"
#include "net/addrguard.h"
#include "push/event.h"
#include "push/sign.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "rpc/httpc.h"

/* CONTRACT section 14: the answer is read up to 64 KiB; the log keeps 1 KiB of a failure's. */
#define SEND_BODY_READ (64u << 10)
#define SEND_BODY_KEPT 1024
#define SEND_ID_MAX    HOOK_ID_MAX

typedef struct attempt {
    webhooks *w;
    hook *h; /* NULL: a test send */
    char id[SEND_ID_MAX];
    long long attempts; /* made before this one */
    char *url;          /* borrowed by the HTTP client until the answer */
    uint64_t started;   /* loop ms */
    webhooks_test_cb test_cb;
    void *test_data;
} attempt;

static void attempt_free(attempt *a)
{
    free(a->url);
    free(a);
}

/* The next attempt's delay after the n-th attempt failed, with ±20% jitter so that the
 * retries of many deliveries spread out; -1 when the schedule is over. */
static int64_t retry_delay(webhooks *w, long long n)
{
    if (n < 1 || n > w->nschedule)
        return -1;
    double base = (double)w->schedule[n - 1];
    double jitter = 0.8 + 0.4 * ((double)(uv_hrtime() % 10007) / 10006.0);
    return (int64_t)(base * jitter);
}

/* Up to max bytes of s as valid UTF-8 without control characters (others become '?'), so the
 * log's JSON stays valid whatever a receiver answered. */
static size_t clean_text(char *out, const char *s, size_t len, size_t max)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o < max;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + n <= len && o + n <= max;
        for (size_t k = 1; ok && k < n; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && n == 1 && c < 0x20 && c != '\n' && c != '\t')
            ok = false;
        if (!ok) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    return o;
}

typedef struct outcome {
    const char *kind; /* "ok", "fail", "gone" */
    long http;
    char reason[160];
    int64_t pause_ms;
    bool final; /* no retry whatever the schedule (an address the guard refuses) */
} outcome;

static void judge(const httpc_result *r, outcome *o)
{
    memset(o, 0, sizeof *o);
    o->kind = "fail";
    if (r->status == HTTPC_OK) {
        o->http = r->http_code;
        if (r->http_code >= 200 && r->http_code < 300) {
            o->kind = "ok";
            return;
        }
        if (r->http_code == 410)
            o->kind = "gone";
        if ((r->http_code == 429 || r->http_code == 503) && r->retry_after > 0)
            o->pause_ms = (int64_t)r->retry_after * 1000;
        snprintf(o->reason, sizeof o->reason, "HTTP %ld", r->http_code);
    } else if (r->status == HTTPC_TIMEOUT) {
        snprintf(o->reason, sizeof o->reason, "timeout");
    } else if (r->refused) {
        snprintf(o->reason, sizeof o->reason, "refused: %s", r->error);
        o->final = true;
    } else {
        snprintf(o->reason, sizeof o->reason, "%s", r->error ? r->error : "connection failed");
    }
}

static void on_recorded(void *data, int status, redisReply *r)
{
    attempt *a = data;
    hook *h = a->h;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "DISABLED"))
        a->w->stats.disabled_by_us++;
    else if (status != STORE_OK || !r || r->type == REDIS_REPLY_ERROR)
        /* unrecorded: the delivery is due again after the hold and is made again */
        log_event(LOG_WARN, "webhook delivery outcome not recorded",
                  r && r->type == REDIS_REPLY_ERROR ? r->str : NULL);
    attempt_free(a);
    hook_release(h);
}

static void record(attempt *a, const outcome *o, const httpc_result *r)
{
    hook *h = a->h;
    webhooks *w = a->w;
    const config *c = &w->a->cfg;
    int64_t delay = o->final || !strcmp(o->kind, "ok") ? -1 : retry_delay(w, a->attempts + 1);
    hook_outcome(h, o->kind, o->pause_ms);
    if (!strcmp(o->kind, "ok"))
        w->stats.succeeded++;
    else if (delay >= 0)
        w->stats.retried++;
    else
        w->stats.failed++;
    char body[SEND_BODY_KEPT];
    size_t blen = strcmp(o->kind, "ok") && r->status == HTTPC_OK
                      ? clean_text(body, r->body, r->body_len, sizeof body)
                      : 0;
    char http[BUF_INT_SIZE] = "", dl[BUF_INT_SIZE], pause[BUF_INT_SIZE], after[BUF_INT_SIZE],
         limits[2 * BUF_INT_SIZE + 2];
    if (o->http)
        buf_format_int(http, o->http);
    buf_format_int(dl, (long long)delay);
    buf_format_int(pause, (long long)o->pause_ms);
    buf_format_int(after, (long long)(c->webhook_disable_after_seconds * 1000));
    snprintf(limits, sizeof limits, "%lld:%lld", (long long)c->events_max,
             (long long)c->events_max_bytes);
    const char *argv[] = {h->entity, h->hooks, h->wh,     h->events, h->wid, a->id, o->kind,
                          http,      body,     o->reason, dl,        pause,  after, limits};
    size_t lens[14];
    for (size_t i = 0; i < 14; i++)
        lens[i] = i == 8 ? blen : strlen(argv[i]);
    /* h stays until the take below is sent, even when the outcome is answered at once */
    h->calls++;
    store_script(w->a->store, LUA_WH_RESULT, on_recorded, a, 4, 14, argv, lens);
    /* The next take goes right behind the outcome, on the same connection (one slot): Redis
     * runs them in that order, so the take sees the outcome, one round trip sooner. */
    hook_attempt_done(h);
    hook_release(h);
}

static void on_answer(void *data, const httpc_result *r)
{
    attempt *a = data;
    outcome o;
    judge(r, &o);
    if (o.final)
        a->w->stats.refused++;
    if (!a->h) {
        a->w->stats.tests++;
        a->test_cb(a->test_data, !strcmp(o.kind, "ok"), o.http, o.reason);
        attempt_free(a);
        return;
    }
    hook *h = a->h;
    double took = (double)(uv_now(a->w->a->loop) - a->started);
    h->attempt_ms = 0.8 * h->attempt_ms + 0.2 * (took < 0.05 ? 0.05 : took);
    if (!a->w->closed && (o.pause_ms > 0 || !strcmp(o.kind, "gone"))) {
        /* what is queued waits for the pause's end, or for the endpoint enabled again */
        if (o.pause_ms > 0)
            h->paused_until = uv_now(a->w->a->loop) + (uint64_t)o.pause_ms;
        hook_unclaim(h);
    }
    if (a->w->closed) {
        /* the lease lapses and the next holder makes this attempt again */
        attempt_free(a);
        hook_attempt_done(h);
        hook_release(h);
        return;
    }
    record(a, &o, r);
}

/* Signs and posts body as the attempt a (its id set). Returns 0, or -1 (a not started). */
static int post(attempt *a, const char *secrets, size_t secrets_len, const buf *body)
{
    int64_t now = isotime_now_ms();
    buf sig = BUF_INIT;
    if (sign_header(&sig, secrets, secrets_len, now, a->id, strlen(a->id), now / 1000, body->data,
                    body->len) != 0) {
        buf_free(&sig);
        return -1;
    }
    char idh[SEND_ID_MAX + 16], tsh[48];
    snprintf(idh, sizeof idh, "webhook-id: %s", a->id);
    snprintf(tsh, sizeof tsh, "webhook-timestamp: %lld", (long long)(now / 1000));
    buf sigh = BUF_INIT;
    buf_append_str(&sigh, "webhook-signature: ");
    buf_append(&sigh, sig.data, sig.len);
    buf_free(&sig);
    const char *headers[] = {idh, tsh, buf_cstr(&sigh)};
    httpc_opts opts = {.headers = headers,
                       .nheaders = 3,
                       .body_limit = SEND_BODY_READ,
                       .guard = a->w->a->cfg.webhook_allow_private ? NULL : addrguard_sockaddr,
                       .https_only = !a->w->a->cfg.webhook_allow_http};
    int rc = httpc_post(a->w->http, a->url, body->data ? body->data : "", body->len,
                        (long)a->w->a->cfg.webhook_timeout_ms, &opts, on_answer, a);
    buf_free(&sigh);
    return rc;
}

taken *send_prepare(hook *h, const redisReply *item)
{
    event_view ev;
    if (item->type != REDIS_REPLY_ARRAY || item->elements != 3 ||
        item->element[0]->type != REDIS_REPLY_STRING || item->element[0]->len >= SEND_ID_MAX ||
        item->element[1]->type != REDIS_REPLY_INTEGER || !event_parse(item->element[2], &ev))
        return NULL;
    taken *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    memcpy(t->id, item->element[0]->str, item->element[0]->len + 1);
    t->attempts = item->element[1]->integer;
    t->at = uv_now(h->w->a->loop);
    event_render_webhook(&t->body, h->eid, &ev);
    return t;
}

void send_start(hook *h, taken *t)
{
    attempt *a = calloc(1, sizeof *a);
    if (!a || !h->url || !(a->url = strndup(h->url, h->url_len))) {
        /* due again after the hold, as if its attempt had died */
        free(a);
        taken_free(t);
        return;
    }
    a->w = h->w;
    a->h = h;
    memcpy(a->id, t->id, sizeof a->id);
    a->attempts = t->attempts;
    a->started = uv_now(h->w->a->loop);
    hook_attempt_start(h);
    h->calls++;
    if (post(a, h->secrets ? h->secrets : "", h->secrets_len, &t->body) != 0) {
        /* no secret to sign with, or no memory: recorded as a failed attempt */
        httpc_result r = {.status = HTTPC_ERROR, .error = "the attempt could not be made"};
        outcome o;
        judge(&r, &o);
        record(a, &o, &r);
    }
    taken_free(t);
}

int webhooks_send_test(webhooks *w, const char *entity_id, const char *wid, const char *url,
                       const char *secrets, size_t secrets_len, webhooks_test_cb cb, void *data)
{
    if (w->closed)
        return -1;
    attempt *a = calloc(1, sizeof *a);
    if (!a || !(a->url = strdup(url))) {
        free(a);
        return -1;
    }
    a->w = w;
    a->test_cb = cb;
    a->test_data = data;
    int64_t now = isotime_now_ms();
    snprintf(a->id, sizeof a->id, "%s:test-%lld", entity_id, (long long)now);
    char at[ISOTIME_STRING_SIZE];
    isotime_format(now, at);
    buf body = BUF_INIT;
    buf_printf(&body,
               "{\"type\":\"webhook.test\",\"timestamp\":\"%s\",\"data\":{\"entityID\":\"%s\","
               "\"webhookId\":\"%s\"}}",
               at, entity_id, wid);
    int rc = post(a, secrets, secrets_len, &body);
    buf_free(&body);
    if (rc != 0)
        attempt_free(a);
    return rc;
}
