-- skill_delete: deletes a skill as an owner or admin, refused (CONFLICT_AT skillId) while a
-- level names it or while it has children (CONTRACT section 15; the message names them, in
-- creation order). The skill leaves the skills hash, the order and the names (the name is free
-- again), the skill tree and progression template (rendered again, so progress no longer lists
-- it), and its board and the board's tombstones are unlinked (UNLINK: freed off the main
-- thread, whatever its size; sweep records naming the skill then find nothing there). No
-- pass over members: the "s:<id>" scores in their prog hashes stay, unread (ids are never
-- reused); contributions keep the scores they recorded. The boards of the skills above it are
-- rebuilt without its scores (board_rebuild_start).
-- KEYS: entity, owners, admins, skills, skill order, skill names, levels, level order
-- ARGV: caller, platform, events_max, now (ISO), skill id
-- Writes a skill.deleted event {id, name}. Returns 1.
local denied = write_open(nil, 'staff')
if denied then return denied end
local sid = ARGV[5]
local old = redis.call('HGET', KEYS[4], sid)
if not old then return fail('NOT_FOUND', 'No such skill.') end
-- A child's Skill JSON holds '"parentId":"<id>"': a quote inside a JSON string is escaped,
-- so the text is found only as the field itself, without decoding every skill.
local children, mark = {}, '"parentId":' .. jstr(sid)
for _, text in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
  if string.find(text, mark, 1, true) then
    children[#children + 1] = cjson.decode(text).id
  end
end
if #children > 0 then
  return fail('CONFLICT_AT', 'skillId The skill has children: ' .. table.concat(children, ', ') ..
    '; move or delete them first.')
end
local naming = {}
local levels = redis.call('HGETALL', KEYS[7])
for i = 1, #levels, 2 do
  for _, id in ipairs(cjson.decode(levels[i + 1]).skillIds or {}) do
    if id == sid then
      naming[#naming + 1] = levels[i]
      break
    end
  end
end
if #naming > 0 then
  table.sort(naming)
  return fail('CONFLICT_AT', 'skillId The skill is named by the levels ' ..
    table.concat(naming, ', ') .. '; update or delete them first.')
end
local s = cjson.decode(old)
local norm = norm_name(s.name)
if redis.call('HGET', KEYS[6], norm) == sid then
  redis.call('HDEL', KEYS[6], norm)
else
  -- a name stored by another normalization: found by its value
  local names = redis.call('HGETALL', KEYS[6])
  for i = 1, #names, 2 do
    if names[i + 1] == sid then redis.call('HDEL', KEYS[6], names[i]) end
  end
end
-- the totals above a deleted skill lose its scores: their boards are rebuilt (the tree as it
-- was, before the render below)
if skill_parent(s) then
  local tree = board_tree(redis.call('HGET', KEYS[1], 'progtpl'), true)
  board_rebuild_start(KEYS[1], board_ancestors(tree, sid))
end
redis.call('HDEL', KEYS[4], sid)
redis.call('ZREM', KEYS[5], old)
redis.call('UNLINK', lb_key(KEYS[1], sid), gone_key(KEYS[1], sid))
render_skilltree(KEYS[1], KEYS[5], KEYS[8])
emit(KEYS[1], ARGV[3], 'skill.deleted', ARGV[4], ARGV[1], '{"id":' .. jstr(sid) ..
  ',"name":' .. jstr(s.name) .. '}')
return 1
