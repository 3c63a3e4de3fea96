-- webhook_rotate: gives a webhook endpoint a new secret (CONTRACT section 14); who may, as
-- webhook_create.lua. The secret in use goes on signing beside the new one until now + keep
-- (24 h): the record "<new> <previous> <previous's end, ms>" (keys.h) holds one previous
-- secret, so a second rotation within them drops the oldest.
-- KEYS: entity, owners, admins, webhooks (keys.h); a platform endpoint: webhooks:{platform}
-- ARGV: caller, platform, events_max, now (ISO), wid, the new secret, now (ms), keep (ms)
-- Returns the endpoint JSON; NOT_FOUND for no such endpoint.
local hooks, refused = webhook_hooks()
if not hooks then return refused end
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
