-- join_rule_set: sets an entity's join rule (CONTRACT section 16) as its owners and admins.
-- KEYS: entity, owners, admins, join (keys.h: ent:{c-…}:join)
-- ARGV: caller, platform, the rule (rendered JSON, checked by the service), now (ISO),
--       events_max
-- The rule replaces any before it; ver counts the changes, so the re-check of rules members
-- can tell a rule it judged by from a newer one. Writes a joinrules.updated event {rule}.
-- Returns {updatedAt, updatedBy}.
local denied = write_open(nil, 'staff')
if denied then return denied end
redis.call('HSET', KEYS[4], 'rule', ARGV[3], 'updatedAt', ARGV[4], 'updatedBy', ARGV[1])
redis.call('HINCRBY', KEYS[4], 'ver', 1)
emit(KEYS[1], ARGV[5], 'joinrules.updated', ARGV[4], ARGV[1], '{"rule":' .. ARGV[3] .. '}')
return {ARGV[4], ARGV[1]}
