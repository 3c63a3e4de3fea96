-- Prepended to every script (service/lua/embed.py). Errors travel as error replies whose first
-- word is the HTTP meaning (NOT_FOUND, FORBIDDEN, CONFLICT, INVALID <field>); the service maps
-- them to the contract's envelope.
local function fail(code, message)
  return redis.error_reply(code .. ' ' .. message)
end

-- The caller's role in an entity: 'owner', 'admin', 'member' or ''.
local function role_of(owners, admins, members, caller)
  if caller == '' then return '' end
  if redis.call('SISMEMBER', owners, caller) == 1 then return 'owner' end
  if redis.call('SISMEMBER', admins, caller) == 1 then return 'admin' end
  if members and redis.call('HEXISTS', members, caller) == 1 then return 'member' end
  return ''
end

-- Write gate shared by every write script. who: 'owners' or 'staff' (owners and admins).
-- Returns nil when the write may go on, else the error reply to return.
local function write_gate(entity, role, platform, who)
  if redis.call('EXISTS', entity) == 0 then
    return fail('NOT_FOUND', 'No such entity.')
  end
  if platform == '1' then return nil end
  local enabled = redis.call('HGET', entity, 'isEnabled') ~= '0'
  local allowed = role == 'owner' or (who == 'staff' and role == 'admin')
  if not enabled then
    if role == 'owner' or role == 'admin' then
      return fail('FORBIDDEN', 'The entity is disabled.')
    end
    return fail('NOT_FOUND', 'No such entity.')
  end
  if not allowed then
    if who == 'owners' then
      return fail('FORBIDDEN', 'Only the entity\'s owners may do this.')
    end
    return fail('FORBIDDEN', 'Only the entity\'s owners and admins may do this.')
  end
  return nil
end

-- The entity as a reply: {flat hash, sorted owners}.
local function entity_reply(entity, owners)
  local list = redis.call('SMEMBERS', owners)
  table.sort(list)
  return {redis.call('HGETALL', entity), list}
end

local function sorted_members(set)
  local list = redis.call('SMEMBERS', set)
  table.sort(list)
  return list
end
