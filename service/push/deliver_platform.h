/* deliver_platform: the platform's endpoints (POST /api/webhooks), each delivering every
 * entity's events: one instance leases an endpoint and takes from its entities in turn. */
#ifndef ENTITYD_PUSH_DELIVER_PLATFORM_H
#define ENTITYD_PUSH_DELIVER_PLATFORM_H

#include <stddef.h>

#include "push/hook.h"

/* A pass: reads the platform's endpoints (webhooks:{platform}), leases them and takes from the
 * entities with work. */
void deliver_platform_pass(webhooks *w);
void deliver_platform_free(webhooks *w);
/* For the metrics: the platform endpoints held here, and the disabled among them. */
void deliver_platform_count(const webhooks *w, size_t *held, size_t *off);

#endif
