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
-- Each key's writes are gathered over the members and sent once, sorted: the inserts into a
-- big zset then walk it near one another, in the CPU's caches. A removal of 1,000 members of a
-- million holds Redis 39-60 ms so, 54-90 ms with a call per member and key (bench/RESULTS.md).
local removed, missing, list, out = 0, 0, {}, {}
local gone_addrs, order, tombs, recs, skill_ok = {}, {}, {}, {}, {}
local entries = call_many('HMGET', KEYS[4], {unpack(ARGV, 7)}, 2000)
for i = 7, #ARGV do
  local a, entry = ARGV[i], entries[i - 6]
  if entry then
    gone_addrs[#gone_addrs + 1] = a
    order[#order + 1] = entry
    -- its entries, tombstoned (a deleted skill's score has no board: nothing to tombstone;
    -- the skills not seen yet asked in one HMGET)
    local flat, rec, ask = redis.call('HGETALL', prog_key(E, a)), {a}, {}
    for j = 1, #flat, 2 do
      local sid = string.sub(flat[j], 1, 2) == 's:' and string.sub(flat[j], 3)
      if sid and skill_ok[sid] == nil and (tonumber(flat[j + 1]) or 0) > 0 then
        skill_ok[sid] = false
        ask[#ask + 1] = sid
      end
    end
    if #ask > 0 then
      local known = redis.call('HMGET', E .. ':skills', unpack(ask))
      for k, sid in ipairs(ask) do skill_ok[sid] = known[k] and true or false end
    end
    for j = 1, #flat, 2 do
      local f, v = flat[j], tonumber(flat[j + 1]) or 0
      local by = f == 'xp' and 'xp' or string.sub(f, 1, 2) == 's:' and string.sub(f, 3)
      if by and by ~= 'xp' and not skill_ok[by] then by = nil end
      if by and v > 0 then
        local t = tombs[by]
        if not t then
          t = {}
          tombs[by] = t
          out[#out + 1] = by
        end
        t[#t + 1] = lb_member(v, a)
        rec[#rec + 1] = by .. '=' .. lb_inv(v)
      end
    end
    if #rec > 1 then recs[#recs + 1] = table.concat(rec, ' ') end
    removed = removed + 1
    list[removed] = jstr(a)
  else
    missing = missing + 1
  end
end

-- Score 0 before each member: the list ZADD takes, sorted first.
local function scored(members)
  table.sort(members)
  local args = {}
  for k, m in ipairs(members) do
    args[2 * k - 1] = '0'
    args[2 * k] = m
  end
  return args
end

if removed > 0 then
  call_many('HDEL', KEYS[4], gone_addrs, 4000)
  table.sort(order)
  call_many('ZREM', KEYS[5], order, 4000)
  for _, by in ipairs(out) do call_many('ZADD', gone_key(E, by), scored(tombs[by]), 4000) end
  if #recs > 0 then call_many('ZADD', E .. ':sweep', scored(recs), 4000) end
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
