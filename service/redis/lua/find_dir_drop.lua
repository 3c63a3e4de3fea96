-- find_dir_drop: removes directory entries that no longer hold (an entity gone, a name it no
-- longer has), AFTER the entity showed it; entries of an entity touched by an add within the
-- grace period stay (find_dir_add.lua).
-- KEYS: meta, created, names
-- ARGV: grace (ms), then per entity: id, created entry ('' = none), names entry ('' = none)
local moving = moving_guard(KEYS[1])
if moving then return moving end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local skipped = 0
for i = 2, #ARGV - 2, 3 do
  local touched = redis.call('HGET', KEYS[1], ARGV[i])
  if touched and now - tonumber(touched) < grace then
    skipped = skipped + 1
  else
    if ARGV[i + 1] ~= '' then
      redis.call('ZREM', KEYS[2], ARGV[i + 1])
      redis.call('HDEL', KEYS[1], ARGV[i])
    end
    if ARGV[i + 2] ~= '' then redis.call('ZREM', KEYS[3], ARGV[i + 2]) end
  end
end
return skipped
