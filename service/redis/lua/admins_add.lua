-- admins_add: owners add admins. KEYS: entity, owners, admins
-- ARGV: caller, platform, events_max, now (ISO), most admins the entity may hold, address...
-- (lowercase, deduplicated). Returns {the number added, then the sorted admins}; FULL
-- (nothing added) past the most. Writes an admin.added event {addresses (those added)} when
-- any was.
local denied = write_open(nil, 'owners')
if denied then return denied end
local full = add_past_most(KEYS[3], false, 6, ARGV[5], 'admins')
if full then return full end
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
