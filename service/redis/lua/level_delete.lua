-- level_delete: deletes a level as an owner or admin. It leaves the levels hash and order and
-- the skill tree and progression template (rendered again). Its reachedAt fields in members'
-- prog hashes are not visited: the level's id gets a new generation in levels:gen (keys.h), so
-- a level created again with that id records and reads "r:<id>:<generation>" (_prelude.lua,
-- progtpl_build) and never sees the old fields.
-- Refused (CONFLICT_AT lvID, naming them) while other levels require it: a required level
-- always exists (level_upsert.lua).
-- KEYS: entity, owners, admins, levels, level order, skill order
-- ARGV: caller, platform, events_max, now (ISO), level id
-- Writes a level.deleted event {id}. Returns 1.
local denied = write_open(nil, 'staff')
if denied then return denied end
local lv = ARGV[5]
local old = redis.call('HGET', KEYS[4], lv)
if not old then return fail('NOT_FOUND', 'No such level.') end
local requiring = {}
local levels = redis.call('HGETALL', KEYS[4])
for i = 1, #levels, 2 do
  -- most levels require nothing: decoded only when the text may name some
  if not string.find(levels[i + 1], '"requires":[]', 1, true) then
    local reqs = cjson.decode(levels[i + 1]).requires
    for _, id in ipairs(type(reqs) == 'table' and reqs or {}) do
      if id == lv then
        requiring[#requiring + 1] = levels[i]
        break
      end
    end
  end
end
if #requiring > 0 then
  table.sort(requiring)
  return fail('CONFLICT_AT', 'lvID The level is required by the levels ' ..
    table.concat(requiring, ', ') .. '; update or delete them first.')
end
redis.call('HDEL', KEYS[4], lv)
redis.call('ZREM', KEYS[5], old)
redis.call('HINCRBY', KEYS[1] .. ':levels:gen', lv, 1)
render_skilltree(KEYS[1], KEYS[6], KEYS[5])
emit(KEYS[1], ARGV[3], 'level.deleted', ARGV[4], ARGV[1], '{"id":' .. jstr(lv) .. '}')
return 1
