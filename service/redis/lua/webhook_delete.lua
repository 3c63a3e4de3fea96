-- webhook_delete: deletes a webhook endpoint (CONTRACT section 14); who may, as
-- webhook_create.lua. An entity's endpoint takes its delivery state and log with it (keys.h,
-- ent:{c-…}:wh:<wid>…); a platform endpoint's, spread over many slots, stop growing at the
-- delivery engine's next pass and go with their entities (docs/DECISIONS.md, "Platform
-- endpoints' deliveries"). The service removes the endpoint from the webhooks zset after this
-- (keys.h: removed AFTER the endpoint is deleted).
-- KEYS: entity, owners, admins, webhooks, wh:<wid>, wh:<wid>:log, wh:<wid>:order, wh:<wid>:due
--       (keys.h); a platform endpoint: webhooks:{platform}
-- ARGV: caller, platform, events_max, now (ISO), wid
-- Returns 1; NOT_FOUND for no such endpoint.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local hooks = KEYS[1]
if #KEYS > 1 then
  local denied = write_gate(KEYS[1], role_of(KEYS[2], KEYS[3], nil, ARGV[1]), ARGV[2], 'staff')
  if denied then return denied end
  hooks = KEYS[4]
end
if redis.call('HDEL', hooks, ARGV[5], 'sec:' .. ARGV[5]) == 0 then
  return fail('NOT_FOUND', 'No such webhook endpoint.')
end
if #KEYS > 4 then redis.call('UNLINK', KEYS[5], KEYS[6], KEYS[7], KEYS[8]) end
return 1
