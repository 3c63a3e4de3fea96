-- whp_disable: disables a platform endpoint (reason "gone": it answered 410; "failing": no
-- success for the disable time), once. A platform endpoint has no entity: no webhook.disabled
-- event is written (an entity's log is its own members' to read).
-- KEYS: webhooks:{platform}   ARGV: wid, reason
-- Returns 1 when it disabled it, 0 otherwise (gone, or disabled already).
local moving = moving_guard(KEYS[1])
if moving then return moving end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local w = cjson.decode(raw)
if not w.enabled or w.enabled == cjson.null then return 0 end
w.enabled = false
w.disabledReason = ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], webhook_json(w))
return 1
