/* webhook_deliveries: an entity endpoint's delivery log, retry and test (CONTRACT section 14);
 * what the platform endpoints' routes (webhook_platform.c) share with them. */
#ifndef ENTITYD_RESOURCES_WEBHOOK_DELIVERIES_H
#define ENTITYD_RESOURCES_WEBHOOK_DELIVERIES_H

#include <stdbool.h>

#include <hiredis.h>

/* A test send's answer (a webhooks_test_cb, push/webhook.h; data the request): 200 with
 * {status, responseStatus, reason}. */
void webhook_deliveries_tested(void *data, bool ok, long http_status, const char *reason);

/* wh_retry.lua's answer (the delivery JSON): 200 with it as data (a store_cb; data the
 * request). */
void webhook_deliveries_retried(void *data, int status, redisReply *r);

#endif
