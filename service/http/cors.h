/* cors: browser callers (CONTRACT section 7): which origins CORS_ORIGINS lets in, the headers
 * an answer carries for them, and the preflight counters. */
#ifndef ENTITYD_CORS_H
#define ENTITYD_CORS_H

#include <stdbool.h>

#include "http/request.h"

/* CORS_ORIGINS is set: preflights are answered and origins are checked. */
bool cors_enabled(const request *req);
/* The request's Origin is listed in CORS_ORIGINS (or it is "*"). */
bool cors_origin_allowed(const request *req);
/* Header lines every answer to req carries for CORS, or NULL for none (CORS_ORIGINS unset, or
 * no Origin header). Valid until the next call. */
const char *cors_response_headers(const request *req);
/* Whether a request may go on as far as its Origin goes (CONTRACT section 13): true unless
 * the method is other than GET/HEAD, the entityd_session cookie is its only credential (no
 * Authorization header, no `signature` query parameter: signed_in_url, told by the caller so
 * that this file calls nothing of request.c's), and its Origin is neither listed in
 * CORS_ORIGINS ("*" does not count) nor the service's own (AUTH_URI's origin, else
 * https://AUTH_DOMAIN). Reads only the request and the settings. */
bool cors_cookie_origin_ok(const request *req, bool signed_in_url);
/* Counts a preflight answered; allowed: its origin is listed. */
void cors_count_preflight(bool allowed);
/* Registers the preflight counters as a metrics source. */
void cors_register_metrics(void);

#endif
