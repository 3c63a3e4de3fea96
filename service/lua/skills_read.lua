-- skills_read: an entity's skills (by creation) and levels (by XP, then id), with the caller's
-- role for the read rule.
-- KEYS: entity, owners, admins, members, skills, skill order, levels, level order
-- ARGV: caller
-- Returns nil for an unknown entity, else {{isEnabled, public}, role, skill records, level
-- records} (records are the stored JSON strings).
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local flags = redis.call('HMGET', KEYS[1], 'isEnabled', 'public')
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local function records(hash, order)
  local ids = redis.call('ZRANGE', order, 0, -1)
  if #ids == 0 then return {} end
  return redis.call('HMGET', hash, unpack(ids))
end
return {{flags[1] or '1', flags[2] or '1'}, role, records(KEYS[5], KEYS[6]),
        records(KEYS[7], KEYS[8])}
