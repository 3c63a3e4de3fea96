-- level_upsert: creates or replaces a level as an owner or admin. Every skill id must be a
-- skill of the entity, checked here so a level never refers to a skill that does not exist.
-- KEYS: entity, owners, admins, skills, levels, level order
-- ARGV: caller, platform, level id, XP, record (JSON: strings only, so nothing loses precision;
--       description/endsAt absent = keep the stored value), now (ms), skill id...
-- Returns {created (1/0), stored record}.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'staff')
if denied then return denied end
for i = 7, #ARGV do
  if redis.call('HEXISTS', KEYS[4], ARGV[i]) == 0 then
    return fail('INVALID', 'skillIds[' .. (i - 7) .. '] skillIds[' .. (i - 7) ..
      '] is not a skill of this entity.')
  end
end
local rec = cjson.decode(ARGV[5])
local old = redis.call('HGET', KEYS[5], ARGV[3])
local created = 1
if old then
  created = 0
  local prev = cjson.decode(old)
  rec.createdAt = prev.createdAt
  if rec.description == nil then rec.description = prev.description end
  if rec.endsAt == nil then rec.endsAt = prev.endsAt end
else
  rec.createdAt = ARGV[6]
  if rec.description == nil then rec.description = '' end
  if rec.endsAt == nil then rec.endsAt = '' end
end
rec.modifiedAt = ARGV[6]
local stored = cjson.encode(rec)
redis.call('HSET', KEYS[5], ARGV[3], stored)
redis.call('ZADD', KEYS[6], tonumber(ARGV[4]), ARGV[3])
return {created, stored}
