-- erase_step: one bounded step of an entity's erasure (entity_delete.lua wrote the record).
-- KEYS: erasure record
-- ARGV: entity key ("ent:{c-…}"), this worker's lease token, lease length (ms), the keys a step
--       should unlink (ERASE_STEP_KEYS: the SCAN COUNT, adapted below)
-- The record's lease (leaseOwner, leaseUntil: Redis TIME in ms) is taken and renewed by each
-- step, in the step itself: a step of a worker whose lease another took over is refused, so no
-- two workers erase one entity at once, and a worker that died is replaced once its lease ends.
-- On a single Redis a step is one SCAN of the node's keyspace from the record's cursor,
-- MATCHing the entity's hash tag (or every entity's, shared by all pending erasures: below),
-- and one UNLINK of what it found (big collections are freed off the main thread): its cost is
-- bounded by COUNT, whatever the entity's size. On Redis Cluster it reads the entity's slot's
-- own list of keys instead (below). Every key of the entity shares the tag, so this finds all
-- of them, idempotency keys (client-chosen names) and the progress of
-- removed members included. No key of the entity can appear after the delete (every write
-- script refuses first), so a full pass from cursor 0 that erases nothing proves none is left;
-- the erasure ends only after such a pass, which also covers a cursor that a restart or a
-- failover of Redis made meaningless (a SCAN cursor is valid for one server's table only).
-- ARGV[5]: the alias claim token this worker released for this entity ('' none yet).
-- ARGV[6], ARGV[7]: the shared scan of a single Redis (erase:scan) and the set of the entities
--          it erases (erase:ids); absent from a release before, whose steps scan for their
--          entity alone.
-- The record goes last, and only once the alias claim it names is released (in the alias's
-- slot, by the worker): while the record is there a claimant takes the claim over at once
-- (entities.c), so the alias is free from the delete's answer on even when the delete's own
-- release was lost. A clean pass (see below) is noted as 'clean', so the steps around the
-- release do not scan again.
-- Returns {'NONE'} (no record), {'BUSY'} (another worker holds the lease), {'MORE', erased by
-- this step, erased in all}, {'RELEASE', erased by this step, erased in all, alias, claim
-- token} (nothing of the entity is left but the record: release that claim, then step again)
-- or {'DONE', erased by this step, erased in all} (the record is gone).
local E, rec = ARGV[1], KEYS[1]
local moving = moving_guard(E)
if moving then return moving end
if redis.call('EXISTS', rec) == 0 then return {'NONE'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', rec, 'leaseOwner', 'leaseUntil', 'cursor', 'pass', 'passErased',
  'erased', 'clean', 'listSkip')
if f[1] and f[1] ~= ARGV[2] and (tonumber(f[2]) or 0) > now then return {'BUSY'} end
local cursor, pass = f[3] or '0', tonumber(f[4]) or 1
local pass_erased, erased = tonumber(f[5]) or 0, tonumber(f[6]) or 0
-- A cluster node answers KEYSLOT; a single Redis refuses it.
local slot = redis.pcall('CLUSTER', 'KEYSLOT', rec)
local single = type(slot) ~= 'number'
local id = string.match(E, '^ent:{(.*)}$')

-- Nothing of the entity is left but the record: it goes once its alias claim is released.
local function finish(n)
  local a = redis.call('HMGET', rec, 'communityURLAlias', 'aliasClaim')
  local alias, claim = a[1] or '', a[2] or ''
  if alias ~= '' and claim ~= '' and claim ~= (ARGV[5] or '') then
    redis.call('HSET', rec, 'leaseOwner', ARGV[2], 'leaseUntil',
      tostring(now + tonumber(ARGV[3])), 'clean', '1', 'erased', string.format('%d', erased))
    return {'RELEASE', n, erased, alias, claim}
  end
  redis.call('DEL', rec)
  if single and ARGV[7] and ARGV[7] ~= '' then redis.call('SREM', ARGV[7], id) end
  return {'DONE', n, erased}
end
if f[7] == '1' then return finish(0) end
local base = tonumber(ARGV[4])

-- Unlinks a list of keys, 256 to a command; returns how many there were.
local function unlink(keys)
  local n = 0
  for i = 1, #keys, 256 do
    n = n + redis.call('UNLINK', unpack(keys, i, math.min(i + 255, #keys)))
  end
  return n
end

-- On Redis Cluster a node keeps the keys of each slot in a list (CLUSTER GETKEYSINSLOT): the
-- entity's slot holds its keys and those of the few others that hash there (a node of 10 M
-- keys has about 600 a slot), so a step reads that list instead of scanning the node, and an
-- erasure takes steps for its own keys, not for the node's. The list is read from its front:
-- the keys of others met there (listSkip, counted by the last step) are read past and the
-- entity's next ARGV[4] keys unlinked. A list read to its end with no key of the entity left
-- proves none is left: it is read within one script, and no key of the entity can appear
-- after the delete. When others hold more than LIST_MAX keys of the slot (a node of over 30 M
-- keys, or a big entity sharing the slot), the steps scan the node as on a single Redis.
local LIST_MAX = 2048
if not single and f[8] ~= 'scan' then
  local want = (tonumber(f[8]) or 0) + base
  local listed = redis.call('CLUSTER', 'GETKEYSINSLOT', slot, want)
  local mine, others = {}, 0
  for _, k in ipairs(listed) do
    if k ~= rec then
      if string.sub(k, 1, #E) == E then mine[#mine + 1] = k else others = others + 1 end
    end
  end
  local n = unlink(mine)
  erased = erased + n
  if #listed < want then return finish(n) end
  redis.call('HSET', rec, 'leaseOwner', ARGV[2], 'leaseUntil',
    tostring(now + tonumber(ARGV[3])), 'erased', string.format('%d', erased), 'listSkip',
    others > LIST_MAX and 'scan' or tostring(others))
  return {'MORE', n, erased}
end

-- On a single Redis, while more than one entity is being erased (ARGV[7]: the erase:ids set
-- of them; ARGV[6]: the erase:scan hash; both absent from a release before), one SCAN of the
-- node serves them all: a step goes on from the shared cursor, MATCHing every entity's keys,
-- unlinks those of the entities in the set (one SMISMEMBER a step) and notes in each one's
-- record the pass it was in (sharedPass). An erasure is done once a whole pass that began
-- after its delete (deletedRedisMs, Redis's clock; since its id is in the set) and after the
-- pass that last unlinked a key of it has ended: a clean pass, as below, but shared, so a
-- thousand pending erasures cost the node two passes, not two thousand. A step of it reads
-- every entity's keys and so costs about twice one that MATCHes one entity's: with one
-- erasure alone the step scans for it alone, as below (the keys it unlinks are gone whichever
-- pass took them, so an erasure may end either way).
local shared, ids = ARGV[6], ARGV[7]
if single and shared and shared ~= '' and ids and ids ~= '' then
  local r2 = redis.call('HMGET', rec, 'deletedRedisMs', 'joinMs', 'sharedPass')
  local since = tonumber(r2[1]) or tonumber(r2[2])
  if redis.call('SADD', ids, id) == 1 or not since then
    -- a record of a release before, whose delete did not list it: it joins from now on
    since = now
    redis.call('HSET', rec, 'joinMs', string.format('%d', now))
  end
  local g = redis.call('HMGET', shared, 'cursor', 'pass', 'passStart', 'doneStart',
    'donePass', 'scanCount')
  local scur, spass = g[1] or '0', tonumber(g[2]) or 1
  local sstart = tonumber(g[3]) or now
  local done_start, done_pass = tonumber(g[4]) or -1, tonumber(g[5]) or 0
  local mine_pass = tonumber(r2[3]) or 0
  local function clean() return done_start > since and done_pass > mine_pass end
  -- the shared scan may have proved it done already, even when it is the last one left
  if clean() then return finish(0) end
  if redis.call('SCARD', ids) > 1 then
    local count = tonumber(g[6]) or base
    local r = redis.call('SCAN', scur, 'MATCH', 'ent:{c-*', 'COUNT', tostring(count))
    local of, order = {}, {}
    for _, k in ipairs(r[2]) do
      local kid = string.match(k, '^ent:{(c%-[^}]+)}')
      if kid then
        if not of[kid] then of[kid] = {}; order[#order + 1] = kid end
        local list = of[kid]
        list[#list + 1] = k
      end
    end
    local batch, n_of = {}, {}
    if #order > 0 then
      local member = redis.call('SMISMEMBER', ids, unpack(order))
      for i, kid in ipairs(order) do
        if member[i] == 1 then
          local own = 'ent:{' .. kid .. '}:erasure'
          for _, k in ipairs(of[kid]) do
            if k ~= own then
              batch[#batch + 1] = k
              n_of[own] = (n_of[own] or 0) + 1
            end
          end
        end
      end
    end
    local n_all = unlink(batch)
    for own, c in pairs(n_of) do
      redis.call('HSET', own, 'sharedPass', tostring(spass))
      redis.call('HINCRBY', own, 'erased', c)
      if own == rec then mine_pass, erased = spass, erased + c end
    end
    if r[1] == '0' then
      done_start, done_pass, spass, sstart = sstart, spass, spass + 1, now
    end
    local want = #batch > 0 and math.floor(count * base / #batch) or count * 2
    count = math.max(base, math.min(want, count * 2, base * 2))
    redis.call('HSET', shared, 'cursor', r[1], 'pass', tostring(spass), 'passStart',
      string.format('%d', sstart), 'doneStart', string.format('%d', done_start), 'donePass',
      tostring(done_pass), 'scanCount', tostring(count))
    if clean() then return finish(n_all) end
    redis.call('HSET', rec, 'leaseOwner', ARGV[2], 'leaseUntil',
      tostring(now + tonumber(ARGV[3])))
    return {'MORE', n_all, erased}
  end
end

-- The step's cost is mostly its UNLINKs (a few µs a key); a key scanned that is not the
-- entity's costs a fraction of that. So the COUNT adapts to the share of the entity's keys
-- the last step met, to unlink about ARGV[4] keys a step: an entity that is a small part of
-- its node (and the final pass, which finds nothing) is scanned in fewer steps. It at most
-- doubles per step and stays within 1 to 2 times ARGV[4]; keys hash evenly over the buckets,
-- so the next step meets about the share the last one met. Not more: while Redis shrinks the
-- node's table after the erasure's deletions, a SCAN visits every old bucket behind each new
-- one, and steps of 4 to 8 times then took up to 4.9 ms (docs/DECISIONS.md).
local count = tonumber(redis.call('HGET', rec, 'scanCount')) or base
local r = redis.call('SCAN', cursor, 'MATCH', E .. '*', 'COUNT', tostring(count))
local found, batch = r[2], {}
for _, k in ipairs(found) do
  if k ~= rec then batch[#batch + 1] = k end
end
local n = unlink(batch)
pass_erased, erased = pass_erased + n, erased + n
if r[1] == '0' and pass_erased == 0 then return finish(n) end
if r[1] == '0' then pass, pass_erased = pass + 1, 0 end
local want = #found > 0 and math.floor(count * base / #found) or count * 2
count = math.max(base, math.min(want, count * 2, base * 2))
redis.call('HSET', rec, 'leaseOwner', ARGV[2], 'leaseUntil', tostring(now + tonumber(ARGV[3])),
  'cursor', r[1], 'pass', tostring(pass), 'passErased', tostring(pass_erased),
  'erased', string.format('%d', erased), 'scanCount', tostring(count))
return {'MORE', n, erased}
