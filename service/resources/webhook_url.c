/* webhook_url: an endpoint's url parsed, and its host judged by where it leads. */
#include "resources/webhook_url.h"

#include <curl/curl.h>
#include <netdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/app.h"
#include "net/addrguard.h"

/* The parts of a parsed URL, released together. */
typedef struct parsed {
    CURLU *u;
    char *scheme, *host, *fragment, *full;
} parsed;

static void parsed_free(parsed *p)
{
    curl_free(p->scheme);
    curl_free(p->host);
    curl_free(p->fragment);
    curl_free(p->full);
    curl_url_cleanup(p->u);
}

static const char *parse_parts(const config *cfg, const char *text, parsed *p)
{
    p->u = curl_url();
    if (!p->u)
        return "url could not be parsed (out of memory).";
    /* Default flags: a scheme libcurl does not support, spaces and a missing host are refused. */
    if (curl_url_set(p->u, CURLUPART_URL, text, 0) != CURLUE_OK)
        return "url must be an absolute https URL.";
    if (curl_url_get(p->u, CURLUPART_SCHEME, &p->scheme, 0) != CURLUE_OK)
        return "url must be an absolute https URL.";
    bool https = !strcmp(p->scheme, "https");
    if (!https && !(cfg->webhook_allow_http && !strcmp(p->scheme, "http")))
        return cfg->webhook_allow_http ? "url must be an http or https URL."
                                       : "url must be an https URL.";
    if (curl_url_get(p->u, CURLUPART_HOST, &p->host, 0) != CURLUE_OK || !p->host[0])
        return "url must name a host.";
    /* A fragment never reaches the receiver: a URL carrying one is a mistake worth saying. */
    if (curl_url_get(p->u, CURLUPART_FRAGMENT, &p->fragment, 0) == CURLUE_OK)
        return "url must not have a fragment (#…).";
    if (curl_url_get(p->u, CURLUPART_URL, &p->full, 0) != CURLUE_OK)
        return "url must be an absolute https URL.";
    if (strlen(p->full) > WEBHOOK_URL_MAX)
        return "url must be at most 2048 characters.";
    return NULL;
}

const char *webhook_url_parse(request *req, const char *text, size_t len, const char **url,
                              const char **host)
{
    if (len == 0 || len > WEBHOOK_URL_MAX || memchr(text, '\0', len))
        return len == 0 ? "url must be an absolute https URL."
                        : "url must be at most 2048 characters.";
    char *copy = arena_strndup(&req->pool, text, len);
    if (!copy)
        return "url could not be parsed (out of memory).";
    parsed p = {0};
    const char *why = parse_parts(&req->app->cfg, copy, &p);
    if (!why) {
        *url = arena_strndup(&req->pool, p.full, strlen(p.full));
        *host = arena_strndup(&req->pool, p.host, strlen(p.host));
        if (!*url || !*host)
            why = "url could not be parsed (out of memory).";
    }
    parsed_free(&p);
    return why;
}

/* A name's resolution on its way. The lookup cannot be called back once the threadpool runs
 * it, so a resolver that hangs past the deadline gets the request answered without it (503)
 * and the lookup's end finds `req` NULL. Its own memory, freed once both the lookup and the
 * deadline timer have called back (`open` counts them). */
typedef struct judging {
    uv_getaddrinfo_t gai;
    uv_timer_t deadline;
    request *req; /* NULL once answered */
    webhook_url_done done;
    int open;
} judging;

static void judging_release(judging *j)
{
    if (--j->open == 0)
        free(j);
}

static void on_deadline_closed(uv_handle_t *h)
{
    judging_release(h->data);
}

/* One sentence whatever the range: the range is no business of a caller's, and a map of what
 * the service's network refuses would help only the one probing it. */
static const char refused[] = "url's host is or resolves to an address webhooks may not reach "
                              "(loopback, private, link-local, shared, reserved or the like).";

static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
    judging *j = gai->data;
    request *req = j->req;
    const char *why = status != 0 || !res ? "url's host does not resolve." : NULL;
    /* Any refused address refuses the name: which one a delivery would get is not known yet. */
    for (const struct addrinfo *a = res; a && !why; a = a->ai_next)
        if (addrguard_sockaddr(a->ai_addr))
            why = refused;
    uv_freeaddrinfo(res);
    if (req) {
        j->req = NULL;
        uv_close((uv_handle_t *)&j->deadline, on_deadline_closed);
        j->done(req, why);
    }
    judging_release(j);
}

static void on_deadline(uv_timer_t *t)
{
    judging *j = t->data;
    request *req = j->req;
    j->req = NULL;
    uv_close((uv_handle_t *)&j->deadline, on_deadline_closed);
    request_fail(req, 503, "unavailable", "url's host did not resolve in time; try again.", NULL);
}

void webhook_url_judge(request *req, const char *host, webhook_url_done done)
{
    if (req->app->cfg.webhook_allow_private) {
        done(req, NULL);
        return;
    }
    const char *reason = NULL;
    if (addrguard_numeric_host(host, &reason)) {
        done(req, reason ? refused : NULL);
        return;
    }
    judging *j = calloc(1, sizeof *j);
    if (!j) {
        request_fail_internal(req, "webhook url: out of memory");
        return;
    }
    *j = (judging){.req = req, .done = done, .open = 2};
    j->gai.data = j->deadline.data = j;
    uv_timer_init(req->app->loop, &j->deadline);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (uv_getaddrinfo(req->app->loop, &j->gai, on_resolved, host, NULL, &hints) != 0) {
        j->req = NULL;
        j->open = 1; /* the timer's close alone */
        uv_close((uv_handle_t *)&j->deadline, on_deadline_closed);
        done(req, "url's host does not resolve.");
        return;
    }
    uv_timer_start(&j->deadline, on_deadline, (uint64_t)req->app->cfg.webhook_timeout_ms, 0);
}
