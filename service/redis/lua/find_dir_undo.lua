-- find_dir_undo: takes back what find_dir_add.lua wrote for an entity write that was then
-- refused (CONTRACT §12), before the request answers; only while the meta entry is still the
-- one it wrote (no add of another write of that entity since), and only the entries that were
-- new. The meta entry goes back to what it was.
-- KEYS: meta, created, names
-- ARGV: entity id, the meta entry written, the one before ('' = none), the created entry to
--       take back ('' = none), the name entry to take back ('' = none)
-- Returns 1 if undone, else 0.
local moving = moving_guard(KEYS[1])
if moving then return moving end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[2], ARGV[4]) end
if ARGV[5] ~= '' then redis.call('ZREM', KEYS[3], ARGV[5]) end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
