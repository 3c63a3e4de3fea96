-- admins_add: owners add admins. KEYS: entity, owners, admins
-- ARGV: caller, platform, events_max, now (ISO), most admins the entity may hold, address...
-- (lowercase, deduplicated). Returns {the number added, then the sorted admins}; FULL
-- (nothing added) past the most. Writes an admin.added event {addresses (those added)} when
-- any was.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'owners')
if denied then return denied end
local fresh = 0
for i = 6, #ARGV do
  if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 0 then fresh = fresh + 1 end
end
if fresh > 0 and redis.call('SCARD', KEYS[3]) + fresh > tonumber(ARGV[5]) then
  return fail('FULL', 'addresses This entity may hold at most ' .. ARGV[5] .. ' admins.')
end
local added = {}
for i = 6, #ARGV do
  if redis.call('SADD', KEYS[3], ARGV[i]) == 1 then added[#added + 1] = jstr(ARGV[i]) end
end
if #added > 0 then
  emit(KEYS[1], ARGV[3], 'admin.added', ARGV[4], ARGV[1], '{"addresses":[' ..
    table.concat(added, ',') .. ']}')
end
local out = sorted_members(KEYS[3])
table.insert(out, 1, #added)
return out
