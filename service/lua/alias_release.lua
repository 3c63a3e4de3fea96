-- alias_release: gives an alias up, only if this entity still holds it.
-- KEYS: alias   ARGV: entity id   Returns 1 when released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
