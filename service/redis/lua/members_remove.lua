-- members_remove: takes members off an entity: owners and admins remove any (mode 'remove'),
-- or a signed caller leaves (mode 'leave', the one address being the caller's own). All or
-- nothing; an address that is not a member counts as missing (removing twice is no error).
-- KEYS: entity, owners, admins, members, member order, XP board
-- ARGV: caller, platform, mode, a fresh random version, events_max, now (ISO), address...
--       (lowercase, deduplicated)
-- A removed member leaves the members hash and the order zset (so the users list) at once. Its
-- board entries are not taken off the big boards here (a ZREM at a random place of a board of a
-- million entries was most of a removal's cost): each is tombstoned instead, added to its
-- board's gone zset (every board read subtracts those), and the member's sweep record lists
-- them (force_add.lua reads it); the sweeper (jobs/sweeper.h, sweep_step.lua) takes entries
-- and tombstones off later, board by board. The service listed the entity in the sweeps set
-- (keys.h) before sending this. Its prog hash, contributions and reachedAt fields stay, so a
-- force-add lists it again with what it had. A removal that removes someone renews
-- membersVersion (cached users pages hold only under the version they were rendered from) and
-- writes one event per call: member.removed {addresses (those removed)}, or member.left
-- {address}.
-- Returns {removed, missing, board...}: the boards changed ('xp' or skill ids, each once).
local moving = moving_guard(KEYS[1])
if moving then return moving end
local E, caller, mode = KEYS[1], ARGV[1], ARGV[3]
local role = role_of(KEYS[2], KEYS[3], nil, caller)
if mode == 'leave' then
  -- Anyone signed in may leave an enabled entity; a disabled one refuses owners and admins
  -- (403) and is 404 to everyone else, as every write.
  if redis.call('EXISTS', E) == 0 then return fail('NOT_FOUND', 'No such entity.') end
  if ARGV[2] ~= '1' and redis.call('HGET', E, 'isEnabled') == '0' then
    if role == 'owner' or role == 'admin' then
      return fail('FORBIDDEN', 'The entity is disabled.')
    end
    return fail('NOT_FOUND', 'No such entity.')
  end
else
  local denied = write_gate(E, role, ARGV[2], 'staff')
  if denied then return denied end
end
local removed, missing, list, boards, out = 0, 0, {}, {}, {}
for i = 7, #ARGV do
  local a = ARGV[i]
  local entry = redis.call('HGET', KEYS[4], a)
  if entry then
    redis.call('HDEL', KEYS[4], a)
    redis.call('ZREM', KEYS[5], entry)
    -- its entries, tombstoned (a deleted skill's score has no board: nothing to tombstone;
    -- the skills asked in one HMGET, not one HEXISTS each)
    local flat, rec, bys, ask = redis.call('HGETALL', prog_key(E, a)), {a}, {}, {}
    for j = 1, #flat, 2 do
      local f = flat[j]
      if f == 'xp' then
        bys[j] = 'xp'
      elseif string.sub(f, 1, 2) == 's:' and (tonumber(flat[j + 1]) or 0) > 0 then
        ask[#ask + 1] = string.sub(f, 3)
        bys[j] = #ask
      end
    end
    local known = #ask > 0 and redis.call('HMGET', E .. ':skills', unpack(ask)) or {}
    for j = 1, #flat, 2 do
      local v, by = tonumber(flat[j + 1]) or 0, bys[j]
      if type(by) == 'number' then by = known[by] and ask[by] or nil end
      if by and v > 0 then
        redis.call('ZADD', gone_key(E, by), '0', lb_member(v, a))
        rec[#rec + 1] = by .. '=' .. lb_inv(v)
        if not boards[by] then
          boards[by] = true
          out[#out + 1] = by
        end
      end
    end
    if #rec > 1 then redis.call('ZADD', E .. ':sweep', '0', table.concat(rec, ' ')) end
    removed = removed + 1
    list[removed] = jstr(a)
  else
    missing = missing + 1
  end
end
if removed > 0 then
  redis.call('HSET', E, 'membersVersion', ARGV[4])
  if mode == 'leave' then
    emit(E, ARGV[5], 'member.left', ARGV[6], caller, '{"address":' .. list[1] .. '}')
  else
    emit(E, ARGV[5], 'member.removed', ARGV[6], caller, '{"addresses":[' ..
      table.concat(list, ',') .. ']}')
  end
end
table.insert(out, 1, missing)
table.insert(out, 1, removed)
return out
