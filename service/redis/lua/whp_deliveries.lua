-- whp_deliveries: GET /api/webhooks/{wid}/deliveries (platform admins, checked by the service
-- before this): a page of the platform endpoint's delivery ids, newest first; the service reads
-- each row from its entity's log (another slot). Read-only.
-- KEYS: whp:{<wid>}:recent   ARGV: limit, cursor (the last delivery id of the page before, or '')
-- Returns {delivery ids…, the next cursor or ''}.
local limit, from = tonumber(ARGV[1]), 0
if ARGV[2] ~= '' then
  local r = redis.call('ZREVRANK', KEYS[1], ARGV[2])
  if not r then return fail('INVALID', 'cursor The cursor is unknown or expired.') end
  from = r + 1
end
local ids = redis.call('ZREVRANGE', KEYS[1], from, from + limit)
local out = {}
for i = 1, math.min(#ids, limit) do out[#out + 1] = ids[i] end
out[#out + 1] = #ids > limit and ids[limit] or ''
return out
