-- entity_read: an entity, its owners, and the caller's role, for the read rule.
-- KEYS: entity, owners, admins, members   ARGV: caller (lowercase address or '')
-- Returns nil for an unknown entity, else {flat hash, sorted owners, role}.
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local reply = entity_reply(KEYS[1], KEYS[2])
reply[3] = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
return reply
