-- entity_create: a new entity with its owners, all or nothing.
-- KEYS: entity, owners   ARGV: fields (JSON object of hash fields), owners (JSON array)
-- Returns the entity's JSON.
local moving = moving_guard(KEYS[1])
if moving then return moving end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return fail('CONFLICT', 'An entity with this id exists.')
end
local owners = cjson.decode(ARGV[2])
hset_json(KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], unpack(owners))
return render_entity(KEYS[1], KEYS[2])
