-- alias_claim: takes a community alias for an entity, or reports who holds it.
-- KEYS: alias   ARGV: entity id, stale holder ('' or the id found stale by the caller)
-- Returns '+' when newly taken, '=' when this entity already held it, else the holder's id.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return '=' end
if not holder or (ARGV[2] ~= '' and holder == ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return '+'
end
return holder
