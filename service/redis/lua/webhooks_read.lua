-- webhooks_read: an entity's webhook endpoints, or one of them, for its owners and admins (and
-- platform admins); or the platform endpoints, whose caller the service has found a platform
-- admin already. Read-only; a refused caller costs Redis the role lookups alone (CONTRACT §12),
-- never the endpoints. Secrets are never answered.
-- KEYS: entity, owners, admins, webhooks (keys.h); platform endpoints: webhooks:{platform}
-- ARGV: caller, platform, wid ('' for all)
-- Returns the endpoint JSONs by createdAt then id, or {the one endpoint's JSON}; NOT_FOUND for
-- no such endpoint.
local hooks = KEYS[1]
if #KEYS > 1 then
  local denied = staff_read(KEYS[1], role_of(KEYS[2], KEYS[3], nil, ARGV[1]), ARGV[2], 'webhooks')
  if denied then return denied end
  hooks = KEYS[4]
end
if ARGV[3] ~= '' then
  local json = redis.call('HGET', hooks, ARGV[3])
  if not json then return fail('NOT_FOUND', 'No such webhook endpoint.') end
  return {json}
end
local flat = redis.call('HGETALL', hooks)
local list = {}
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, 4) ~= 'sec:' then
    local w = cjson.decode(flat[i + 1])
    list[#list + 1] = {w.createdAt .. ' ' .. flat[i], flat[i + 1]}
  end
end
table.sort(list, function(a, b) return a[1] < b[1] end)
local out = {}
for i, e in ipairs(list) do out[i] = e[2] end
return out
