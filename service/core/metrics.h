/* metrics: the registry. Request counters and histograms are kept here; every other component
 * registers a source that renders its own families, so the registry reads no one's state. */
#ifndef ENTITYD_METRICS_H
#define ENTITYD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Appends a component's families to the exposition text. */
typedef void (*metrics_source)(buf *out, void *ctx);
/* Adds a source; sources render in the order they were added. Returns -1 when full. */
int metrics_register(metrics_source fn, void *ctx);
/* Forgets every source (for a process that builds its components again, as tests do). */
void metrics_reset_sources(void);

/* Requests are counted per route slot. labels[i] names slot i as Prometheus label pairs
 * (`route="/x",method="GET"`); the strings must outlive the process's metrics. */
void metrics_set_routes(const char *const *labels, size_t n);
/* Counts one answered request; slot -1 (or out of range): no route matched. */
void metrics_observe_request(int slot, int status, double seconds);

/* Appends the exposition text (text/plain; version=0.0.4): build info, requests, sources; or
 * what the renderer set below appends instead. */
void metrics_render(buf *out);
/* This process's own exposition text, never labelled. */
void metrics_render_process(buf *out);
/* Replaces what metrics_render appends (with several workers: every worker's text, labelled,
 * metrics_shared.h); NULL restores this process's own. */
typedef void (*metrics_renderer)(buf *out);
void metrics_set_renderer(metrics_renderer fn);

/* For sources: one family with its HELP and TYPE lines and a single unlabelled sample; or the
 * HELP and TYPE lines alone, for a family whose labelled samples follow. */
void metrics_counter(buf *out, const char *name, const char *help, uint64_t v);
void metrics_gauge(buf *out, const char *name, const char *help, double v);
void metrics_family(buf *out, const char *name, const char *type, const char *help);
/* One sample of a family told apart by one label: the label's value and the count. */
typedef struct metrics_labelled {
    const char *value;
    uint64_t v;
} metrics_labelled;
/* A counter family with one sample per item, name{label="value"} v, in the items' order. */
void metrics_counter_by(buf *out, const char *name, const char *help, const char *label,
                        const metrics_labelled *items, size_t n);

#endif
