-- wh_retry: POST …/webhooks/{wid}/deliveries/{did}/retry, owners and admins: the delivery is
-- pending again and due now (its attempts go on counting; past the schedule's end one attempt
-- is made). Sent while the endpoint is enabled, by the instance holding its lease.
-- KEYS: entity, owners, admins, webhooks, wh   ARGV: caller, platform, wid, delivery id,
-- events_max, 'p' for a platform endpoint (the service found it in webhooks:{platform}, another
-- slot; KEYS[4] is then unused)
-- Returns the delivery's JSON; CONFLICT for a delivery whose event was trimmed.
local refused = write_open(nil, 'staff')
if refused then return refused end
local wid, id, wh = ARGV[3], ARGV[4], KEYS[5]
if ARGV[6] ~= 'p' and redis.call('HEXISTS', KEYS[4], wid) == 0 then return fail('NOT_FOUND', 'No such webhook.') end
local rec = redis.call('HGET', wh .. ':log', id)
if not rec then return fail('NOT_FOUND', 'No such delivery.') end
local d = cjson.decode(rec)
if d.reason == 'trimmed' then
  return fail('CONFLICT', 'The event is gone from the entity\'s log: it cannot be sent again.')
end
local now = redis_now_ms()
d.status, d.nextAttemptAt, d.reason = 'pending', iso_ms(now), cjson.null
redis.call('ZADD', wh .. ':due', string.format('%.0f', now), id)
return delivery_put(KEYS[1], wh, d, ARGV[5])
