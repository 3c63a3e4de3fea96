-- skills_add: adds skills as an owner or admin, all or nothing; names are unique per entity
-- (compared by their normalized form: trimmed, ASCII case folded).
-- KEYS: entity, owners, admins, skills, skill order, skill names, level order
-- ARGV: caller, platform, createdAt (ms, unused here), events_max, now (ISO), most skills the
--       entity may hold (FULL past it, nothing added), SKILLTREE_MAX_BYTES (past it 'TREE <i>
--       <message>', i the first skill of the request that does not fit, nothing added), then
--       per skill: id, normalized name, Skill JSON
-- Writes a skill.added event {ids} (request order).
-- Returns the Skill JSONs in request order. Order scores come from a per-entity sequence
-- (the entity hash's skillSeq), so skills list in the order they were created, batches in
-- request order, whatever the clocks of the instances say.
local denied = write_open(nil, 'staff')
if denied then return denied end
if redis.call('HLEN', KEYS[4]) + (#ARGV - 7) / 3 > tonumber(ARGV[6]) then
  return fail('FULL', '- This entity may hold at most ' .. ARGV[6] .. ' skills.')
end
local seen = {}
for i = 8, #ARGV, 3 do
  local norm = ARGV[i + 1]
  if seen[norm] or redis.call('HEXISTS', KEYS[6], norm) == 1 then
    return fail('CONFLICT', 'A skill with that name exists in this entity.')
  end
  seen[norm] = true
end
local grown, size = 0, skilltree_size(KEYS[1])
for i = 8, #ARGV, 3 do
  grown = grown + #ARGV[i + 2] + 1 -- the Skill and a comma
  if not skilltree_fits(KEYS[1], grown, ARGV[7], size) then
    return fail('TREE', ((i - 8) / 3) .. ' ' .. skilltree_refusal(ARGV[7]))
  end
end
local out, ids = {}, {}
local seq = redis.call('HINCRBY', KEYS[1], 'skillSeq', (#ARGV - 7) / 3) - (#ARGV - 7) / 3
for i = 8, #ARGV, 3 do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
  redis.call('HSET', KEYS[6], ARGV[i + 1], ARGV[i])
  redis.call('ZADD', KEYS[5], seq + #out, ARGV[i + 2])
  out[#out + 1] = ARGV[i + 2]
  ids[#ids + 1] = jstr(ARGV[i])
end
render_skilltree(KEYS[1], KEYS[5], KEYS[7])
emit(KEYS[1], ARGV[4], 'skill.added', ARGV[5], ARGV[1], '{"ids":[' .. table.concat(ids, ',') .. ']}')
return out
