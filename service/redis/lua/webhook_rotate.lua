-- webhook_rotate: gives a webhook endpoint a new secret (CONTRACT section 14); who may, as
-- webhook_create.lua. The secret in use goes on signing beside the new one until now + keep
-- (24 h): the record "<new> <previous> <previous's end, ms>" (keys.h) holds one previous
-- secret, so a second rotation within them drops the oldest.
-- KEYS: entity, owners, admins, webhooks (keys.h); a platform endpoint: webhooks:{platform}
-- ARGV: caller, platform, events_max, now (ISO), wid, the new secret, now (ms), keep (ms)
-- Returns the endpoint JSON; NOT_FOUND for no such endpoint.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local hooks = KEYS[1]
if #KEYS > 1 then
  local denied = write_gate(KEYS[1], role_of(KEYS[2], KEYS[3], nil, ARGV[1]), ARGV[2], 'staff')
  if denied then return denied end
  hooks = KEYS[4]
end
local json = redis.call('HGET', hooks, ARGV[5])
if not json then return fail('NOT_FOUND', 'No such webhook endpoint.') end
local current = string.match(redis.call('HGET', hooks, 'sec:' .. ARGV[5]) or '', '^(%S+)')
local record = ARGV[6]
if current then
  record = record .. ' ' .. current .. ' ' ..
    string.format('%d', tonumber(ARGV[7]) + tonumber(ARGV[8]))
end
redis.call('HSET', hooks, 'sec:' .. ARGV[5], record)
return json
