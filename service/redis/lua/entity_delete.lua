-- entity_delete: deletes an entity as its owner (or a platform admin), compare-and-set on __v.
-- KEYS: entity, owners, admins, erasure record (keys.h: the entity's tombstone)
-- ARGV: caller, platform ('1'/'0'), expected __v ('' when not given), now (ms), now (ISO),
--       the erase:ids key (a single Redis's set of entities being erased; absent from a release
--       before)
-- The entity hash is renamed to the erasure record in one O(1) step: every read (which reads the
-- entity hash first) answers 404 and every write script's write_gate (EXISTS entity) answers
-- NOT_FOUND before it writes anything, from this script on. The rest of the entity's keys are
-- erased afterwards in bounded steps (erase_step.lua), which resume from the record.
-- Returns {the alias it held ('' for none), the token of its claim ('' when unknown)}.
local denied = write_open(nil, 'owners')
if denied then return denied end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], '__v') ~= ARGV[3] then
  return fail('CONFLICT', 'The entity has changed since that __v; read it again.')
end
local alias = redis.call('HGET', KEYS[1], 'communityURLAlias') or ''
local claim = redis.call('HGET', KEYS[1], 'aliasClaim') or ''
-- A record left by an earlier entity of this id cannot exist (ids are random), but RENAME would
-- silently replace it: keep its progress instead by refusing.
if redis.call('EXISTS', KEYS[4]) == 1 then
  return fail('CONFLICT', 'The entity is being erased already.')
end
redis.call('RENAME', KEYS[1], KEYS[4])
-- What reads return is dropped at once (memory); the fields naming the alias stay, so that the
-- erasure's end can release a claim this answer could not.
redis.call('HDEL', KEYS[4], 'json', 'skilltree', 'progtpl')
-- deletedRedisMs: Redis's clock, against which the shared scan's passes are timed
-- (erase_step.lua): a pass begun after it sees every key of the entity there is.
local t = redis.call('TIME')
redis.call('HSET', KEYS[4], 'erasing', '1', 'deletedAt', ARGV[5], 'deletedAtMs', ARGV[4],
  'deletedRedisMs', string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)),
  'deletedBy', ARGV[1], 'cursor', '0', 'pass', '1', 'passErased', '0', 'erased', '0')
-- On a single Redis the id joins the set the shared scan erases (erase_step.lua): from now on
-- every step of any erasure unlinks this entity's keys too. Not on a cluster, where the set
-- lives in another slot and each erasure reads its own slot.
local cluster = type(redis.pcall('CLUSTER', 'KEYSLOT', KEYS[4])) == 'number'
if ARGV[6] and ARGV[6] ~= '' and not cluster then
  redis.call('SADD', ARGV[6], string.match(KEYS[1], '^ent:{(.*)}$'))
end
return {alias, claim}
