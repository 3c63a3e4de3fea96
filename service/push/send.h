/* send: one delivery attempt (webhook.h): the Standard Webhooks POST of a claimed delivery to
 * its endpoint over the loop's HTTP client, and its outcome recorded (wh_result.lua). */
#ifndef ENTITYD_PUSH_SEND_H
#define ENTITYD_PUSH_SEND_H

#include "push/hook.h"

struct redisReply;

/* One item of a wh_take answer ({delivery id, attempts, XRANGE entry}) parsed and rendered;
 * NULL when it is malformed or memory is short (it is then due again after the hold, as if its
 * attempt had died). */
taken *send_prepare(hook *h, const struct redisReply *item);
/* Starts t's attempt to h's url, signed with h's secrets, and frees t. Takes a call of h
 * (h->calls, h->inflight) until the outcome is recorded. */
void send_start(hook *h, taken *t);

#endif
