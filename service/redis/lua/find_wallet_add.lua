-- find_wallet_add: a wallet's index entry of an entity (CONTRACT §9), written BEFORE the entity
-- write that gives the wallet the role is sent (keys.h, wallet:{…}): the entity's script runs
-- in another slot and cannot write it, so the entry comes first and a read drops it while the
-- entity does not hold the role. Marks the entry touched now, so that no drop within the grace
-- period (find_wallet_drop.lua) can remove it while that entity write may still be on its way.
-- KEYS: meta, any, owner, admin, member of one wallet, or of several in turn (outside Redis
--       Cluster only, where every key may be in one script)
-- ARGV: per wallet, in the same order: entity id, roles (letters of o, a, m), since (ms; '' =
--       now, Redis's clock), mark (this request's random mark, kept in the meta entry so that
--       find_wallet_undo.lua knows the entry is still the one this request wrote; '' = none)
-- The since of an entry already indexed stays, unless ARGV gives an older one (the backfill).
-- Returns, per wallet, 3 strings: the meta entry written, the one before ('' = none) and the
-- letters of the lists that gained the entry ('n' the wallet's list, o, a, m): what an undo
-- takes back.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for w = 0, #KEYS - 5, 5 do
  local a = w / 5 * 4
  local id, letters, mark = ARGV[a + 1], ARGV[a + 2], ARGV[a + 4]
  local since = now
  if ARGV[a + 3] ~= '' then since = tonumber(ARGV[a + 3]) end
  local cur = redis.call('HGET', KEYS[w + 1], id)
  local old = cur and tonumber(string.match(cur, '^(%d+)'))
  if old and old <= since then since = old end
  local s16 = string.format('%016d', since)
  local entry = s16 .. ':' .. id
  if old and old ~= since then
    -- an older since from the backfill: move the entries the wallet has to it
    local o = string.format('%016d', old) .. ':' .. id
    for i = 2, 5 do
      if redis.call('ZREM', KEYS[w + i], o) == 1 then redis.call('ZADD', KEYS[w + i], 0, entry) end
    end
  end
  local meta = s16 .. ' ' .. string.format('%d', now)
  if mark ~= '' then meta = meta .. ' ' .. mark end
  redis.call('HSET', KEYS[w + 1], id, meta)
  local gained = ''
  if redis.call('ZADD', KEYS[w + 2], 0, entry) == 1 then gained = 'n' end
  local roles = {o = KEYS[w + 3], a = KEYS[w + 4], m = KEYS[w + 5]}
  for l in string.gmatch(letters, '[oam]') do
    if redis.call('ZADD', roles[l], 0, entry) == 1 then gained = gained .. l end
  end
  out[#out + 1] = meta
  out[#out + 1] = cur or ''
  out[#out + 1] = gained
end
return out
