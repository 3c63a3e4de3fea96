/* metrics: counters and histograms kept on the loop, rendered in Prometheus text format. */
#ifndef ENTITYD_METRICS_H
#define ENTITYD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct app;
struct route;

/* Counts one answered request: route NULL for requests that matched no route. */
void metrics_observe_request(const struct route *route, int method, int status, double seconds);
void metrics_connection_opened(void);
void metrics_connection_closed(void);
void metrics_connection_rejected(void);
/* A connection closed for a deadline: write (a client not reading) or read (header, body, idle). */
void metrics_connection_timed_out(bool write);

/* Appends the exposition text (text/plain; version=0.0.4). */
void metrics_render(buf *out, struct app *a);

#endif
