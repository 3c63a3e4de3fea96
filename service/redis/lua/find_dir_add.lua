-- find_dir_add: the directory's entries of an entity (keys.h, dir:{entities}), written BEFORE
-- the entity write (its creation, or an update that may rename it) is sent; touched now, so no
-- drop within the grace period removes them (find_dir_drop.lua).
-- KEYS: meta, created, names   ARGV: entity id, createdAt (ms; '' = none), folded name ('' = none)
-- Returns {the meta entry written, the one before ('' = none), 1 if the created entry is new,
-- 1 if the name entry is new}: what find_dir_undo.lua takes back if the write is refused.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local written = string.format('%d', now)
redis.call('HSET', KEYS[1], ARGV[1], written)
local created, named = 0, 0
if ARGV[2] ~= '' then
  created = redis.call('ZADD', KEYS[2], 0, string.format('%016d', tonumber(ARGV[2])) .. ':' .. ARGV[1])
end
if ARGV[3] ~= '' then named = redis.call('ZADD', KEYS[3], 0, ARGV[3] .. '\1' .. ARGV[1]) end
return {written, before, created, named}
