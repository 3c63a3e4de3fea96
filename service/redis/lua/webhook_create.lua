-- webhook_create: makes a webhook endpoint (CONTRACT section 14): an entity's, for its owners
-- and admins (or a platform admin), or a platform endpoint, whose caller the service has found
-- a platform admin already (the script then names no entity). The service added the endpoint to
-- the webhooks zset before this (keys.h: added BEFORE the endpoint is written) and removes it
-- again when this refuses.
-- KEYS: entity, owners, admins, webhooks (keys.h); a platform endpoint: webhooks:{platform}
-- ARGV: caller, platform, events_max, now (ISO), wid, url, events (JSON array of types), the
--       description, the secret ("whsec_…"), the most endpoints the hash may hold
-- Writes the endpoint JSON (webhook_json) and its secret (sec:<wid>). Returns the endpoint JSON;
-- FULL past the most.
local hooks, refused = webhook_hooks()
if not hooks then return refused end
local held = 0
for _, f in ipairs(redis.call('HKEYS', hooks)) do
  if string.sub(f, 1, 4) ~= 'sec:' then held = held + 1 end
end
if held >= tonumber(ARGV[10]) then
  return fail('FULL', '- At most ' .. ARGV[10] .. ' webhook endpoints may exist here; delete ' ..
    'one first.')
end
local json = webhook_json({id = ARGV[5], url = ARGV[6], events = cjson.decode(ARGV[7]),
  description = ARGV[8], enabled = true, createdAt = ARGV[4], createdBy = ARGV[1]})
-- 122 random bits: a second endpoint of one id is not expected, but never replaces one
if redis.call('HSETNX', hooks, ARGV[5], json) == 0 then
  return fail('CONFLICT', 'A webhook endpoint of this id exists already; try again.')
end
redis.call('HSET', hooks, 'sec:' .. ARGV[5], ARGV[9])
return json
