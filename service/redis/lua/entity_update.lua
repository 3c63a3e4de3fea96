-- entity_update: changes an entity as its owner (or a platform admin), compare-and-set on __v.
-- KEYS: entity, owners, admins, webhooks
-- ARGV: caller, platform ('1'/'0'), expected __v ('' when not given), fields (JSON object of
--       hash fields to set), owners (JSON array; replaces the set), alias guard ('' or '=' and
--       the alias the entity had when this update claimed its own: if another update changed it
--       since, it may have released the alias this one relies on, so this answers RETRY and the
--       service claims again), events_max, now (ISO)
-- Writes an entity.updated event {__v (the new one)}; an owner removed who is no admin has its
-- webhook endpoints disabled (webhooks_creator_gone).
-- The fields carry aliasClaim, the token of the alias claim, whenever they set the alias.
-- Returns {entity JSON, the alias held before, the token of its claim ('' when unknown), the
-- name before, the owners before}: the service drops the index entries these no longer hold.
local denied = write_open(nil, 'owners')
if denied then return denied end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], '__v') ~= ARGV[3] then
  return fail('CONFLICT', 'The entity has changed since that __v; read it again.')
end
if ARGV[6] ~= '' and '=' .. (redis.call('HGET', KEYS[1], 'communityURLAlias') or '') ~= ARGV[6] then
  return fail('RETRY', 'The entity changed during the alias claim.')
end
local old_alias = redis.call('HGET', KEYS[1], 'communityURLAlias') or ''
local old_claim = redis.call('HGET', KEYS[1], 'aliasClaim') or ''
local old_name = redis.call('HGET', KEYS[1], 'name') or ''
local old_owners = redis.call('SMEMBERS', KEYS[2])
local owners = cjson.decode(ARGV[5])
hset_json(KEYS[1], ARGV[4])
local v = redis.call('HINCRBY', KEYS[1], '__v', 1)
redis.call('DEL', KEYS[2])
redis.call('SADD', KEYS[2], unpack(owners))
emit(KEYS[1], ARGV[7], 'entity.updated', ARGV[8], ARGV[1], '{"__v":' .. string.format('%d', v) .. '}')
for _, gone in ipairs(old_owners) do
  webhooks_creator_gone(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[7], ARGV[8], ARGV[1], gone)
end
return {render_entity(KEYS[1], KEYS[2]), old_alias, old_claim, old_name, old_owners}
