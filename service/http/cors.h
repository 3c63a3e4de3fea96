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
/* Counts a preflight answered; allowed: its origin is listed. */
void cors_count_preflight(bool allowed);
/* Registers the preflight counters as a metrics source. */
void cors_register_metrics(void);

#endif
