-- wh_lease: takes, renews or hands back the delivery lease of one endpoint (keys.h,
-- ent:{c-…}:wh:<wid>: lease, leaseUntil). A lease still held by another instance is left to
-- it; a lapsed one (its holder dead or cut off) is taken over.
-- KEYS: entity, webhooks, wh   ARGV: wid, token, lease ms, '1' to hand it back
-- Returns 'HELD' (ours until now + lease ms), 'BUSY', 'RELEASED', 'GONE' (the entity is
-- deleted) or 'MISSING' (no such endpoint: nothing is written).
local g = moving_guard(KEYS[1])
if g then return g end
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 'MISSING' end
local cur = redis.call('HMGET', KEYS[3], 'lease', 'leaseUntil')
local now = redis_now_ms()
if ARGV[4] == '1' then
  if cur[1] == ARGV[2] then redis.call('HDEL', KEYS[3], 'lease', 'leaseUntil') end
  return 'RELEASED'
end
if cur[1] and cur[1] ~= ARGV[2] and (tonumber(cur[2]) or 0) > now then return 'BUSY' end
redis.call('HSET', KEYS[3], 'lease', ARGV[2], 'leaseUntil',
  string.format('%.0f', now + tonumber(ARGV[3])))
return 'HELD'
