-- skill_update: renames a skill or changes its description, as an owner or admin. Names are
-- unique per entity by their normalized form (trimmed, ASCII case folded): a name another skill
-- holds is CONFLICT; the skill's own name in another case is fine. Levels name skills by id, so
-- nothing else changes but the skill tree and progression template, rendered again.
-- KEYS: entity, owners, admins, skills, skill order, skill names, level order
-- ARGV: caller, platform, events_max, now (ISO), skill id, name (a JSON string, '' keeps it),
--       its normalized form ('' with it), description (a JSON string, '' keeps it),
--       SKILLTREE_MAX_BYTES (a change growing the tree past it: CONFLICT_AT, the field that grew
--       most; nothing changed)
-- Writes a skill.updated event {id, changed: the fields given}. Returns the Skill JSON.
local denied = write_open(nil, 'staff')
if denied then return denied end
local sid, name, norm, desc = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local old = redis.call('HGET', KEYS[4], sid)
if not old then return fail('NOT_FOUND', 'No such skill.') end
local s = cjson.decode(old)
local changed = {}
local old_name, old_desc = jstr(s.name), jstr(s.description)
if name ~= '' then
  local holder = redis.call('HGET', KEYS[6], norm)
  if holder and holder ~= sid then
    return fail('CONFLICT', 'A skill with that name exists in this entity.')
  end
  changed[#changed + 1] = '"name"'
else
  name = old_name
end
if desc ~= '' then
  changed[#changed + 1] = '"description"'
else
  desc = old_desc
end
local json = '{"id":' .. jstr(s.id) .. ',"entityID":' .. jstr(s.entityID) .. ',"name":' ..
  name .. ',"description":' .. desc .. ',"createdAt":' .. jstr(s.createdAt) ..
  ',"createdBy":' .. jstr(s.createdBy) .. '}'
if not skilltree_fits(KEYS[1], #json - #old, ARGV[9]) then
  local field = 'name'
  if ARGV[8] ~= '' and (ARGV[6] == '' or #desc - #old_desc >= #name - #old_name) then
    field = 'description'
  end
  return fail('CONFLICT_AT', field .. ' ' .. field .. ' ' .. skilltree_refusal(ARGV[9]))
end
if ARGV[6] ~= '' then
  local was = norm_name(s.name)
  if redis.call('HGET', KEYS[6], was) == sid then redis.call('HDEL', KEYS[6], was) end
  redis.call('HSET', KEYS[6], norm, sid)
end
local score = redis.call('ZSCORE', KEYS[5], old)
redis.call('ZREM', KEYS[5], old)
redis.call('ZADD', KEYS[5], score or '0', json)
redis.call('HSET', KEYS[4], sid, json)
render_skilltree(KEYS[1], KEYS[5], KEYS[7])
emit(KEYS[1], ARGV[3], 'skill.updated', ARGV[4], ARGV[1], '{"id":' .. jstr(sid) ..
  ',"changed":[' .. table.concat(changed, ',') .. ']}')
return json
