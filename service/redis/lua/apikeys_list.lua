-- apikeys_list: an entity's API keys, for its owners (and platform admins). Read-only; a
-- refused caller costs Redis the role lookup alone (CONTRACT §12), never the keys' records.
-- KEYS: entity, owners, admins, apikeys   ARGV: caller, platform
-- Returns the apikeys hash as HGETALL gives it (the service answers no hash).
local owner = redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
if ARGV[2] ~= '1' then
  local enabled = redis.call('HGET', KEYS[1], 'isEnabled') ~= '0'
  if not enabled and not owner then return fail('NOT_FOUND', 'No such entity.') end
  if not owner then
    return fail('FORBIDDEN', 'Only the entity\'s owners may see its API keys.')
  end
end
return redis.call('HGETALL', KEYS[4])
