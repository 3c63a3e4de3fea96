-- admins_list: the admins, for owners and admins.
-- KEYS: entity, owners, admins   ARGV: caller, platform   Returns the sorted admins.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
if ARGV[2] ~= '1' then
  local enabled = redis.call('HGET', KEYS[1], 'isEnabled') ~= '0'
  if not enabled and role ~= 'owner' then return fail('NOT_FOUND', 'No such entity.') end
  if role ~= 'owner' and role ~= 'admin' then
    return fail('FORBIDDEN', 'Only the entity\'s owners and admins may see its admins.')
  end
end
return sorted_members(KEYS[3])
