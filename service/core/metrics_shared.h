/* metrics_shared: with several workers, each publishes its exposition text in a slot of one
 * shared-memory segment (mapped before the fork), and a scrape that lands on any worker renders
 * every worker's families, each sample labelled worker="N". */
#ifndef ENTITYD_METRICS_SHARED_H
#define ENTITYD_METRICS_SHARED_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* Largest exposition text one worker can publish; a longer one is cut at a family boundary. */
#define METRICS_SHARED_SLOT_BYTES (1u << 20)

/* In the supervisor, before forking: maps one slot per worker. Returns 0 or -1 (errno). */
int metrics_shared_init(size_t workers);
/* In a worker: which slot is its own; from then on metrics_render renders every slot. */
void metrics_shared_join(size_t index);
bool metrics_shared_active(void);
/* Renders this worker's own text into its slot (called on a timer and by every scrape). */
void metrics_shared_publish(void);
/* In the supervisor: empties a dead worker's slot, so its figures vanish until it is back. */
void metrics_shared_clear(size_t index);
/* Every worker's families, labelled; this worker's own figures are rendered now. */
void metrics_shared_render(buf *out);

#endif
