-- alias_release: gives an alias up, only if this entity still holds it.
-- KEYS: alias   ARGV: entity id   Returns 1 when released.
local cur = redis.call('GET', KEYS[1])
if cur and (cur == ARGV[1] or string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. ' ') then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
