-- join_rule_delete: ends an entity's self-joining (CONTRACT section 16) as its owners and
-- admins: the rule goes with the re-check's keys; members who joined by rules stay members
-- (still shown "via rules"), no longer re-checked.
-- KEYS: entity, owners, admins, join, join:due, join:failing (keys.h)
-- ARGV: caller, platform, now (ISO), events_max
-- Writes a joinrules.updated event {rule: null}. Returns 1, or NOT_FOUND when there is no rule.
local denied = write_open(nil, 'staff')
if denied then return denied end
if redis.call('EXISTS', KEYS[4]) == 0 then
  return fail('NOT_FOUND', 'This entity has no join rule.')
end
redis.call('UNLINK', KEYS[4], KEYS[5], KEYS[6])
emit(KEYS[1], ARGV[4], 'joinrules.updated', ARGV[3], ARGV[1], '{"rule":null}')
return 1
