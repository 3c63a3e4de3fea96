/* sign: the Standard Webhooks signature of a delivery (CONTRACT section 14): "v1," + base64 of
 * HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{body}", keyed with the bytes of a
 * "whsec_<base64>" secret. */
#ifndef ENTITYD_PUSH_SIGN_H
#define ENTITYD_PUSH_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Appends the webhook-signature header's value to out: one signature per secret that signs at
 * now_ms, space-separated. secrets is an endpoint's sec:<wid> field (keys.h): "<secret>" or
 * "<secret> <previous> <previous's end, ms>" (the previous signs while now_ms is before its
 * end). Returns 0, or -1 when the field holds no usable secret (out unchanged). */
int sign_header(buf *out, const char *secrets, size_t secrets_len, int64_t now_ms,
                const char *msg_id, size_t id_len, int64_t timestamp, const char *body,
                size_t body_len);

#endif
