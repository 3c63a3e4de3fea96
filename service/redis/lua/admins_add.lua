-- admins_add: owners add admins. KEYS: entity, owners, admins
-- ARGV: caller, platform, events_max, now (ISO), address... (lowercase, deduplicated).
-- Returns the sorted admins. Writes an admin.added event {addresses (those added)} when any was.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'owners')
if denied then return denied end
local added = {}
for i = 5, #ARGV do
  if redis.call('SADD', KEYS[3], ARGV[i]) == 1 then added[#added + 1] = jstr(ARGV[i]) end
end
if #added > 0 then
  emit(KEYS[1], ARGV[3], 'admin.added', ARGV[4], ARGV[1], '{"addresses":[' ..
    table.concat(added, ',') .. ']}')
end
return sorted_members(KEYS[3])
