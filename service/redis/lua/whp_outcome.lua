-- whp_outcome: a platform endpoint's failing time (keys.h, whp:{<wid>}: failingSince), kept
-- across its entities: a success anywhere ends it, and failing with no success for the disable
-- time disables the endpoint (whp_disable.lua, in the endpoint's own slot).
-- KEYS: whp:{<wid>}   ARGV: 'ok' or 'fail', disable after ms
-- Returns 'OK', or 'DISABLE' (failing too long; its failing time restarts).
local moving = moving_guard(KEYS[1])
if moving then return moving end
local now = redis_now_ms()
if ARGV[1] == 'ok' then
  redis.call('HDEL', KEYS[1], 'failingSince')
  return 'OK'
end
local since = tonumber(redis.call('HGET', KEYS[1], 'failingSince'))
if not since then
  redis.call('HSET', KEYS[1], 'failingSince', string.format('%.0f', now))
  return 'OK'
end
if now - since >= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], 'failingSince')
  return 'DISABLE'
end
return 'OK'
