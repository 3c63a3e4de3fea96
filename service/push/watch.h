/* watch: tells the push layer's readers (event streams, webhook deliveries) that an entity's
 * event stream (keys.h, ent:{c-…}:events) may have grown, on whichever instance wrote it.
 *
 * Each watched entity's events key is read through the store with the read cache's tracking
 * (tracking.h), so Redis sends an invalidation of that key after the next write to it; each
 * invalidation calls the entity's subscribers, once per burst, and the key is read again to
 * stay tracked. While the read cache is off (tracking not confirmed), and once when it comes
 * back, every watched entity is called every WATCH_POLL_MS instead: a call may be spurious,
 * never missed. Loop thread only. */
#ifndef ENTITYD_PUSH_WATCH_H
#define ENTITYD_PUSH_WATCH_H

#define WATCH_POLL_MS 1000

struct app;
typedef struct watch watch;
typedef struct watch_sub watch_sub;

/* Called on the loop, never inside watch_subscribe or watch_unsubscribe. */
typedef void (*watch_cb)(void *data, const char *entity_id);

/* NULL when out of memory. */
watch *watch_new(struct app *a);
void watch_close(watch *w);
/* After the loop has stopped; NULL is fine. */
void watch_free(watch *w);

/* cb(data, entity_id) whenever the entity's events may have grown, from now until
 * watch_unsubscribe. NULL when out of memory. */
watch_sub *watch_subscribe(watch *w, const char *entity_id, watch_cb cb, void *data);
void watch_unsubscribe(watch_sub *s);

#endif
