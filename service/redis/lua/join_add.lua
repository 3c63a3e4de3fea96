-- join_add: adds a signed caller the service found eligible under the entity's join rule
-- (CONTRACT section 16) as a member by rules.
-- KEYS: entity, owners, admins, members, member order, join, join:due (keys.h)
-- ARGV: caller, platform, addedAt (ms, 16 digits zero-padded), a fresh random version,
--       events_max, now (ISO), the rule's ver the caller was judged by, when its first re-check
--       is due (ms), most members the entity may hold, the caller's address (last, for
--       add_past_most)
-- Its entry is "<addedAt>:<address>:<address>::rules": added by itself, chain "", by rules
-- (keys.h). A member already (however added) joins 0 and keeps its entry. The rule must still be
-- the one judged by: CONFLICT when it changed or went meanwhile (the service judges again).
-- Respects the entity's most members as force_add.lua does (FULL). A member added again comes
-- back on its boards (member_back). Writes a member.joined event {address}.
-- Returns {joined, board...} (the boards its return changed, for the read cache).
local denied = write_open(KEYS[4], 'leave')
if denied then return denied end
local a = ARGV[10]
if redis.call('HEXISTS', KEYS[4], a) == 1 then return {0} end
if redis.call('HGET', KEYS[6], 'ver') ~= ARGV[7] then
  return fail('CONFLICT', 'The join rule changed while it was checked; try again.')
end
local full = add_past_most(KEYS[4], true, 10, ARGV[9], 'members')
if full then return full end
local entry = ARGV[3] .. ':' .. a .. ':' .. a .. '::rules'
redis.call('HSET', KEYS[4], a, entry)
redis.call('ZADD', KEYS[5], 0, entry)
redis.call('ZADD', KEYS[7], ARGV[8], a)
redis.call('HDEL', KEYS[1] .. ':join:failing', a)
local out = {}
member_back(KEYS[1], a, tree_reader(KEYS[1]), {}, out)
redis.call('HSET', KEYS[1], 'membersVersion', ARGV[4])
emit(KEYS[1], ARGV[5], 'member.joined', ARGV[6], a, '{"address":"' .. a .. '"}')
table.insert(out, 1, 1)
return out
