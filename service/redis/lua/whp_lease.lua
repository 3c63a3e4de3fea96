-- whp_lease: takes or renews a platform endpoint's delivery lease (keys.h, whp:{<wid>}): one
-- instance delivers it for every entity. A lease still held by another instance is left to it; a
-- lapsed one (its holder dead or cut off) is taken over. The endpoint itself lives in another
-- slot (webhooks:{platform}): the service read it in the same pass and leases only what it read.
-- KEYS: whp:{<wid>}   ARGV: token, lease ms
-- Returns 'HELD' (ours until now + lease ms) or 'BUSY'.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local cur = redis.call('HMGET', KEYS[1], 'lease', 'leaseUntil')
local now = redis_now_ms()
if cur[1] and cur[1] ~= ARGV[1] and (tonumber(cur[2]) or 0) > now then return 'BUSY' end
redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'leaseUntil',
  string.format('%.0f', now + tonumber(ARGV[2])))
-- a deleted endpoint's lease (and failing time) goes a week after its last holder let go
redis.call('PEXPIRE', KEYS[1], 7 * 86400000)
return 'HELD'
