-- members_page: one page of an entity's members, in (addedAt, address) order.
-- KEYS: entity, owners, admins, members, member order
-- ARGV: caller, cursor (the last order entry returned, or ''), limit
-- Returns nil for an unknown entity, else {flags, role, entries, records, next} where flags is
-- {isEnabled, public} as stored, entries the order entries of the page, records the member
-- records, next the cursor of the next page or ''. O(log N + limit).
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local flags = redis.call('HMGET', KEYS[1], 'isEnabled', 'public')
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local limit = tonumber(ARGV[3])
local from = '-'
if ARGV[2] ~= '' then from = '(' .. ARGV[2] end
local entries = redis.call('ZRANGEBYLEX', KEYS[5], from, '+', 'LIMIT', 0, limit + 1)
local nextc = ''
if #entries > limit then
  entries[#entries] = nil
  nextc = entries[#entries]
end
local records = {}
if #entries > 0 then
  local addrs = {}
  for i, e in ipairs(entries) do addrs[i] = string.sub(e, 18) end
  records = redis.call('HMGET', KEYS[4], unpack(addrs))
end
return {{flags[1] or '1', flags[2] or '1'}, role, entries, records, nextc}
