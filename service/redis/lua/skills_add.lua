-- skills_add: adds skills as an owner or admin, all or nothing; names are unique per entity
-- (compared by their normalized form: trimmed, ASCII case folded).
-- KEYS: entity, owners, admins, skills, skill order, skill names, level order
-- ARGV: caller, platform, createdAt (ms, unused here), events_max, now (ISO), most skills the
--       entity may hold (FULL past it, nothing added), SKILLTREE_MAX_BYTES (past it 'TREE <i>
--       <message>', i the first skill of the request that does not fit, nothing added), '1'
--       when the request was for several skills (the parent's field is then parentIds[i],
--       else parentId), then per skill: id, normalized name, Skill JSON up to its createdBy
--       (its last two fields, parentId and depth, are known here only), parent id ('': a root)
-- A parent is a skill of this entity already stored (INVALID otherwise); a skill under a
-- parent at SKILL_DEPTH_MAX is CONFLICT_AT; nothing is added then.
-- Writes a skill.added event {ids} (request order).
-- Returns the Skill JSONs in request order. Order scores come from a per-entity sequence
-- (the entity hash's skillSeq), so skills list in the order they were created, batches in
-- request order, whatever the clocks of the instances say.
local denied = write_open(nil, 'staff')
if denied then return denied end
local count = (#ARGV - 8) / 4
if redis.call('HLEN', KEYS[4]) + count > tonumber(ARGV[6]) then
  return fail('FULL', '- This entity may hold at most ' .. ARGV[6] .. ' skills.')
end
local seen = {}
for i = 9, #ARGV, 4 do
  local norm = ARGV[i + 1]
  if seen[norm] or redis.call('HEXISTS', KEYS[6], norm) == 1 then
    return fail('CONFLICT', 'A skill with that name exists in this entity.')
  end
  seen[norm] = true
end
local jsons, depth_of = {}, {}
for i = 9, #ARGV, 4 do
  local k, parent = (i - 9) / 4, ARGV[i + 3]
  local field = ARGV[8] == '1' and 'parentIds[' .. k .. ']' or 'parentId'
  local depth = 0
  if parent ~= '' then
    if depth_of[parent] == nil then
      local p = redis.call('HGET', KEYS[4], parent)
      depth_of[parent] = p and (tonumber(cjson.decode(p).depth) or 0) or false
    end
    if depth_of[parent] == false then
      return fail('INVALID', field .. ' ' .. field .. ' names no skill of this entity.')
    end
    depth = depth_of[parent] + 1
    if depth > SKILL_DEPTH_MAX then
      return fail('CONFLICT_AT', field .. ' ' .. field .. ' is at depth ' .. depth_of[parent] ..
        '; a skill under it would be deeper than ' .. SKILL_DEPTH_MAX .. '.')
    end
  end
  jsons[#jsons + 1] = ARGV[i + 2] .. ',"parentId":' .. (parent ~= '' and jstr(parent) or 'null') ..
    ',"depth":' .. depth .. '}'
end
local grown, size = 0, skilltree_size(KEYS[1])
for k, json in ipairs(jsons) do
  grown = grown + #json + 1 -- the Skill and a comma
  if not skilltree_fits(KEYS[1], grown, ARGV[7], size) then
    return fail('TREE', (k - 1) .. ' ' .. skilltree_refusal(ARGV[7]))
  end
end
local ids = {}
local seq = redis.call('HINCRBY', KEYS[1], 'skillSeq', count) - count
for k, json in ipairs(jsons) do
  local i = 9 + 4 * (k - 1)
  redis.call('HSET', KEYS[4], ARGV[i], json)
  redis.call('HSET', KEYS[6], ARGV[i + 1], ARGV[i])
  redis.call('ZADD', KEYS[5], seq + k - 1, json)
  ids[k] = jstr(ARGV[i])
end
render_skilltree(KEYS[1], KEYS[5], KEYS[7])
emit(KEYS[1], ARGV[4], 'skill.added', ARGV[5], ARGV[1], '{"ids":[' .. table.concat(ids, ',') .. ']}')
return jsons
