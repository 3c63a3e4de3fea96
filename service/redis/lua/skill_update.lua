-- skill_update: renames a skill, changes its description or moves it under another parent, as
-- an owner or admin. Names are unique per entity by their normalized form (trimmed, ASCII case
-- folded): a name another skill holds is CONFLICT; the skill's own name in another case is
-- fine. Levels name skills by id, so nothing else changes but the skill tree and progression
-- template, rendered again.
-- A move (CONTRACT section 15): the new parent must be a skill of this entity (INVALID
-- parentId), must not be the skill or lie below it (CONFLICT_AT parentId, the message naming
-- the cycle from the skill up to itself), and must leave every skill of the moved branch at
-- most SKILL_DEPTH_MAX deep (CONFLICT_AT parentId). The branch's skills get their new depths.
-- KEYS: entity, owners, admins, skills, skill order, skill names, level order
-- ARGV: caller, platform, events_max, now (ISO), skill id, name (a JSON string, '' keeps it),
--       its normalized form ('' with it), description (a JSON string, '' keeps it),
--       SKILLTREE_MAX_BYTES (a change growing the tree past it: CONFLICT_AT, the field that grew
--       most; nothing changed), parent ('' keeps it, 'null' makes the skill a root, else the
--       new parent's id)
-- A move starts the rebuild of the boards above the old and the new place (board_rebuild_start).
-- Writes a skill.updated event {id, changed: the fields given but the parent} when a name or a
-- description was given, and a skill.moved event {id, from, to: the parents before and after,
-- null for none} when the parent changed. Returns the Skill JSON.
local denied = write_open(nil, 'staff')
if denied then return denied end
local sid, name, norm, desc = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local old = redis.call('HGET', KEYS[4], sid)
if not old then return fail('NOT_FOUND', 'No such skill.') end
local s = cjson.decode(old)
local was_name = s.name
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
local from, depth = skill_parent(s), tonumber(s.depth) or 0
local to, branch = from, nil
if ARGV[10] ~= '' then
  if ARGV[10] ~= 'null' then to = ARGV[10] else to = nil end
end
if to ~= from then
  local all, by_id = skills_preorder(KEYS[5])
  local me = by_id[sid]
  local up = to and by_id[to]
  if to and not up then
    return fail('INVALID', 'parentId parentId names no skill of this entity.')
  end
  -- the cycle: from the skill up through its would-be ancestors until it is met again
  local path, at = {sid}, up
  while at and #path <= #all + 1 do
    path[#path + 1] = at.s.id
    if at == me then
      return fail('CONFLICT_AT', 'parentId That parent would close the cycle ' ..
        table.concat(path, ' -> ') .. '.')
    end
    at = at.parent and by_id[at.parent]
  end
  depth = up and (tonumber(up.s.depth) or 0) + 1 or 0
  -- the branch and how far below the skill it reaches
  branch = {}
  local deepest, stack = 0, {{me, 0}}
  while #stack > 0 do
    local n, d = stack[#stack][1], stack[#stack][2]
    stack[#stack] = nil
    branch[#branch + 1] = {n, d}
    if d > deepest then deepest = d end
    for _, c in ipairs(n.kids or {}) do stack[#stack + 1] = {c, d + 1} end
  end
  if depth + deepest > SKILL_DEPTH_MAX then
    return fail('CONFLICT_AT', 'parentId The branch would reach depth ' .. (depth + deepest) ..
      ', past the deepest allowed, ' .. SKILL_DEPTH_MAX .. '.')
  end
end
s.name, s.description = cjson.decode(name), cjson.decode(desc)
local json = skill_json(s, to, depth)
if not skilltree_fits(KEYS[1], #json - #old, ARGV[9]) then
  local field = 'name'
  if ARGV[8] ~= '' and (ARGV[6] == '' or #desc - #old_desc >= #name - #old_name) then
    field = 'description'
  elseif ARGV[6] == '' and ARGV[8] == '' then
    field = 'parentId'
  end
  return fail('CONFLICT_AT', field .. ' ' .. field .. ' ' .. skilltree_refusal(ARGV[9]))
end
if ARGV[6] ~= '' then
  local was = norm_name(was_name)
  if redis.call('HGET', KEYS[6], was) == sid then redis.call('HDEL', KEYS[6], was) end
  redis.call('HSET', KEYS[6], norm, sid)
end
local score = redis.call('ZSCORE', KEYS[5], old)
redis.call('ZREM', KEYS[5], old)
redis.call('ZADD', KEYS[5], score or '0', json)
redis.call('HSET', KEYS[4], sid, json)
-- the branch below the skill moves with it: each skill's depth follows
for i = 2, #(branch or {}) do
  local n, d = branch[i][1], branch[i][2]
  local text = skill_json(n.s, n.parent, depth + d)
  local was = redis.call('HGET', KEYS[4], n.s.id)
  if was and was ~= text then
    redis.call('ZREM', KEYS[5], was)
    redis.call('ZADD', KEYS[5], n.score, text)
    redis.call('HSET', KEYS[4], n.s.id, text)
  end
end
-- the totals above the branch's old and new places change: their boards are rebuilt
if to ~= from then
  local _, by_id = skills_preorder(KEYS[5])
  local ids, seen = {}, {}
  for _, start in ipairs({from or false, to or false}) do
    local at, hops = start and by_id[start], 0
    while at and hops <= SKILL_DEPTH_MAX and not seen[at.s.id] do
      seen[at.s.id] = true
      ids[#ids + 1] = at.s.id
      at, hops = at.parent and by_id[at.parent], hops + 1
    end
  end
  board_rebuild_start(KEYS[1], ids)
end
render_skilltree(KEYS[1], KEYS[5], KEYS[7])
if #changed > 0 then
  emit(KEYS[1], ARGV[3], 'skill.updated', ARGV[4], ARGV[1], '{"id":' .. jstr(sid) ..
    ',"changed":[' .. table.concat(changed, ',') .. ']}')
end
if to ~= from then
  emit(KEYS[1], ARGV[3], 'skill.moved', ARGV[4], ARGV[1], '{"id":' .. jstr(sid) .. ',"from":' ..
    (from and jstr(from) or 'null') .. ',"to":' .. (to and jstr(to) or 'null') .. '}')
end
return json
