-- wh_deliveries: GET …/webhooks/{wid}/deliveries, owners and admins: a page of the log, newest
-- first. Read-only; a refused caller costs the role lookups alone (CONTRACT section 12).
-- KEYS: entity, owners, admins, webhooks, wh   ARGV: caller, platform, wid, limit, cursor (the
-- last delivery id of the page before, or '')
-- Returns {the deliveries' JSON texts…, the next cursor or ''}.
local o = redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1
local a = redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
if ARGV[2] ~= '1' then
  local enabled = redis.call('HGET', KEYS[1], 'isEnabled') ~= '0'
  if not o and not (a and enabled) then
    if not enabled then return fail('NOT_FOUND', 'No such entity.') end
    return fail('FORBIDDEN', 'Only the entity\'s owners and admins may do this.')
  end
end
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 0 then return fail('NOT_FOUND', 'No such webhook.') end
local order, limit, from = KEYS[5] .. ':order', tonumber(ARGV[4]), 0
if ARGV[5] ~= '' then
  local r = redis.call('ZREVRANK', order, ARGV[5])
  if not r then return fail('INVALID', 'cursor The cursor is unknown or expired.') end
  from = r + 1
end
local ids = redis.call('ZREVRANGE', order, from, from + limit)
local out = {}
for i = 1, math.min(#ids, limit) do
  out[#out + 1] = redis.call('HGET', KEYS[5] .. ':log', ids[i]) or 'null'
end
out[#out + 1] = #ids > limit and ids[limit] or ''
return out
