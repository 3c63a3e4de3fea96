-- whp_recent: lists deliveries just made for a platform endpoint (keys.h, whp:{<wid>}:recent),
-- the index GET /api/webhooks/{wid}/deliveries pages through (the rows are read from each
-- entity's log), trimmed as a log is: WEBHOOK_LOG_MAX and 7 days.
-- KEYS: whp:{<wid>}:recent   ARGV: log max, delivery ids ("<entity id>:<event id>")…
-- Returns 1.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local now = redis_now_ms()
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'NX', now, ARGV[i]) end
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if excess > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 7 * 86400000)
return 1
