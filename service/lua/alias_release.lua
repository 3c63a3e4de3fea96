-- alias_release: gives up one claim of an alias: only the claim this entity made with this
-- token (alias_claim.lua). A newer claim of the same entity has another token and stays.
-- KEYS: alias   ARGV: entity id, claim token   Returns 1 when released.
local cur = redis.call('GET', KEYS[1])
if cur and ARGV[2] ~= '' then
  local holder, token = string.match(cur, '^(%S+) %d+ (%S+)$')
  if holder == ARGV[1] and token == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
end
return 0
