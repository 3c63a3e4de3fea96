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
local hooks, refused = webhook_hooks()
if not hooks then return refused end
if redis.call('HDEL', hooks, ARGV[5], 'sec:' .. ARGV[5]) == 0 then
  return fail('NOT_FOUND', 'No such webhook endpoint.')
end
if #KEYS > 4 then redis.call('UNLINK', KEYS[5], KEYS[6], KEYS[7], KEYS[8]) end
return 1
