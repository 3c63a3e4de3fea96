-- level_upsert: creates or replaces a level as an owner or admin. Every skill id must be a
-- skill of the entity, checked here so a level never refers to a skill that does not exist.
-- KEYS: entity, owners, admins, skills, levels, level order, skill order
-- ARGV: caller, platform, level id, XP (decimal), entity id, name (JSON string), description
--       (JSON string, or '' to keep the stored one), skillIds (JSON array), scores (JSON array),
--       endsAt (JSON string or null, or '' to keep the stored one), now (ISO, JSON string),
--       events_max, most levels the entity may hold (creating one past it: FULL),
--       SKILLTREE_MAX_BYTES (a level growing the tree past it: CONFLICT_AT, the field that grew
--       most; nothing changed), requires (JSON array of level ids, or '' to keep the stored
--       one), the number of required level ids, each required level id, skill id...
-- Every required level must be a level of the entity (INVALID requires), and the levels'
-- requires stay free of cycles (CONFLICT_AT requires, naming the cycle): so a level's
-- prerequisites can always be reached first, and progtpl_build finds each of them.
-- Writes a level.updated event {id, created}.
-- The Level JSON is assembled here in a fixed key order, numbers copied as the service wrote
-- them (no Lua number ever holds XP). Returns {created (1/0), Level JSON}.
local denied = write_open(nil, 'staff')
if denied then return denied end
local lv, nreq = ARGV[3], tonumber(ARGV[16])
local skills_at = 17 + nreq
for i = skills_at, #ARGV do
  if redis.call('HEXISTS', KEYS[4], ARGV[i]) == 0 then
    return fail('INVALID', 'skillIds[' .. (i - skills_at) .. '] skillIds[' .. (i - skills_at) ..
      '] is not a skill of this entity.')
  end
end
for i = 17, 16 + nreq do
  if ARGV[i] ~= lv and redis.call('HEXISTS', KEYS[5], ARGV[i]) == 0 then
    return fail('INVALID', 'requires requires[' .. (i - 17) .. '] ' .. jstr(ARGV[i]) ..
      ' is not a level of this entity.')
  end
end
-- A cycle through this level: a path from one of its required levels back to it, over the
-- stored levels' requires (a walk over at most the entity's levels, each read once).
if nreq > 0 then
  local cycle
  for i = 17, 16 + nreq do
    if ARGV[i] == lv then cycle = {lv, lv} end
  end
  local seen, prev, stack = {}, {}, {}
  for i = 17, 16 + nreq do
    if not seen[ARGV[i]] then
      seen[ARGV[i]], prev[ARGV[i]] = true, lv
      stack[#stack + 1] = ARGV[i]
    end
  end
  while not cycle and #stack > 0 do
    local x = table.remove(stack)
    local text = redis.call('HGET', KEYS[5], x)
    local reqs = text and cjson.decode(text).requires
    for _, y in ipairs(type(reqs) == 'table' and reqs or {}) do
      if y == lv then
        cycle = {lv}
        local c = x
        while c ~= lv do -- back along the walk: each step nearer a required level of lv
          table.insert(cycle, 2, c)
          c = prev[c]
        end
        cycle[#cycle + 1] = lv
        break
      end
      if not seen[y] then
        seen[y], prev[y] = true, x
        stack[#stack + 1] = y
      end
    end
  end
  if cycle then
    return fail('CONFLICT_AT', 'requires requires would close a cycle: ' ..
      table.concat(cycle, ' -> ') .. '.')
  end
end
local old = redis.call('HGET', KEYS[5], ARGV[3])
if not old and redis.call('HLEN', KEYS[5]) >= tonumber(ARGV[13]) then
  return fail('FULL', 'lvID This entity may hold at most ' .. ARGV[13] .. ' levels.')
end
local created, desc, ends, since, requires = 1, ARGV[7], ARGV[10], ARGV[11], ARGV[15]
-- what each field the body gives held before (its JSON's length), to name the one that grew
local was = {name = 0, description = 0, skillIds = 0, scores = 0, requires = 0}
if old then
  created = 0
  local prev = cjson.decode(old)
  was.name, was.description = #jstr(prev.name), #jstr(prev.description)
  was.skillIds, was.scores = #cjson.encode(prev.skillIds), #cjson.encode(prev.scores)
  -- a level stored before requires existed requires nothing
  local kept = {}
  for i, r in ipairs(type(prev.requires) == 'table' and prev.requires or {}) do
    kept[i] = jstr(r)
  end
  was.requires = 2 + #table.concat(kept, ',')
  if requires == '' then requires = '[' .. table.concat(kept, ',') .. ']' end
  if desc == '' then desc = jstr(prev.description) end
  if ends == '' then
    ends = prev.endsAt == cjson.null and 'null' or jstr(prev.endsAt)
  end
  since = jstr(prev.createdAt)
else
  if desc == '' then desc = '""' end
  if ends == '' then ends = 'null' end
  if requires == '' then requires = '[]' end
end
local json = '{"id":' .. jstr(ARGV[3]) .. ',"entityID":' .. jstr(ARGV[5]) .. ',"name":' ..
  ARGV[6] .. ',"description":' .. desc .. ',"skillIds":' .. ARGV[8] .. ',"scores":' ..
  ARGV[9] .. ',"requires":' .. requires .. ',"endsAt":' .. ends .. ',"XP":' .. ARGV[4] ..
  ',"createdAt":' .. since .. ',"modifiedAt":' .. ARGV[11] .. '}'
if not skilltree_fits(KEYS[1], #json - (old and #old or -1), ARGV[14]) then
  local field, most = 'name', nil
  local given = {name = ARGV[6], description = ARGV[7], skillIds = ARGV[8], scores = ARGV[9],
    requires = ARGV[15]}
  for _, f in ipairs({'description', 'name', 'skillIds', 'scores', 'requires'}) do
    local grew = #given[f] - was[f]
    if given[f] ~= '' and (not most or grew > most) then field, most = f, grew end
  end
  return fail('CONFLICT_AT', field .. ' ' .. field .. ' ' .. skilltree_refusal(ARGV[14]))
end
if old then redis.call('ZREM', KEYS[6], old) end
redis.call('HSET', KEYS[5], ARGV[3], json)
redis.call('ZADD', KEYS[6], ARGV[4], json)
render_skilltree(KEYS[1], KEYS[7], KEYS[6])
emit(KEYS[1], ARGV[12], 'level.updated', cjson.decode(ARGV[11]), ARGV[1], '{"id":' ..
  jstr(ARGV[3]) .. ',"created":' .. (created == 1 and 'true' or 'false') .. '}')
return {created, json}
