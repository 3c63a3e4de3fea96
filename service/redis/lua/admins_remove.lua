-- admins_remove: owners remove an admin (removing one who is not is no error), and an admin
-- steps down (the address its own).
-- KEYS: entity, owners, admins, webhooks   ARGV: caller, platform, events_max, now (ISO), address.
-- Returns the sorted admins. Writes an admin.removed event {address} when it was an admin; an
-- address left with no role has its webhook endpoints disabled (webhooks_creator_gone).
local moving = moving_guard(KEYS[1])
if moving then return moving end
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local self = role == 'admin' and ARGV[1] == ARGV[5]
local denied = write_gate(KEYS[1], role, ARGV[2], self and 'staff' or 'owners')
if denied then return denied end
if redis.call('SREM', KEYS[3], ARGV[5]) == 1 then
  emit(KEYS[1], ARGV[3], 'admin.removed', ARGV[4], ARGV[1], '{"address":' ..
    jstr(ARGV[5]) .. '}')
  webhooks_creator_gone(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[1], ARGV[5])
end
return sorted_members(KEYS[3])
