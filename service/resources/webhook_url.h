/* webhook_url: a webhook endpoint's url as CONTRACT section 14 takes it. Parsed by libcurl's URL
 * API (the parser deliveries use too), https (or http with WEBHOOK_ALLOW_HTTP), no fragment, at
 * most WEBHOOK_URL_MAX bytes; then, unless WEBHOOK_ALLOW_PRIVATE, its host refused when it is,
 * or resolves to, an address net/addrguard.h refuses. The resolution is a first check only: a
 * delivery checks the address it connects to (docs/DECISIONS.md). URLs are never logged. */
#ifndef ENTITYD_WEBHOOK_URL_H
#define ENTITYD_WEBHOOK_URL_H

#include <stddef.h>

#include "http/request.h"

#define WEBHOOK_URL_MAX 2048

/* Parses text (len bytes of valid UTF-8). Returns NULL when it is a URL an endpoint may have,
 * with *url the URL as libcurl writes it back (what is stored and delivered to) and *host its
 * host (an IPv6 literal in brackets), both in the request's pool; else a sentence saying why
 * not (static). */
const char *webhook_url_parse(request *req, const char *text, size_t len, const char **url,
                              const char **host);

/* The verdict on a host: refusal NULL when it may be reached, else a sentence saying why not
 * (static). Runs on the loop, the request still owed its answer. */
typedef void (*webhook_url_done)(request *req, const char *refusal);

/* Judges host (from webhook_url_parse): a numeric address at once, a name once every address it
 * resolves to is known (uv_getaddrinfo, on the threadpool: the loop never waits on DNS). Only
 * after the caller's right was checked (CONTRACT §12: no outbound call ahead of the gate). With
 * WEBHOOK_ALLOW_PRIVATE every host may be reached, unresolved. done runs exactly once, perhaps
 * before this returns; or the request is answered here instead: 500 out of memory, 503 when
 * the lookup takes longer than WEBHOOK_TIMEOUT_MS (a resolver that hangs holds no request). */
void webhook_url_judge(request *req, const char *host, webhook_url_done done);

#endif
