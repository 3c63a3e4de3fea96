-- members_remove: takes members off an entity: owners and admins remove any (mode 'remove'),
-- or a signed caller leaves (mode 'leave', the one address being the caller's own). Each
-- removal is all or nothing; an address that is not a member counts as missing (removing twice
-- is no error). The removals to one entity that arrived in one loop turn come as one call (a
-- group, service/redis/group.h): they run one after the other, each answered as alone.
-- KEYS: the group's: entity, owners, admins, members, member order, XP board
-- ARGV: the group's: events_max; the number of removals; then each removal's key count (0),
--       argument count and arguments: caller, platform, mode, a fresh random version, now
--       (ISO), address... (lowercase, deduplicated)
-- A removed member leaves the members hash, the order zset (so the users list) and every board
-- its prog hash lists it on: its own entries, a cost that grows with its own fields, not with
-- the entity's size. Its prog hash, contributions and reachedAt fields stay, so a force-add
-- lists it again with what it had. A removal that removes someone renews membersVersion
-- (cached users pages hold only under the version they were rendered from) and writes one
-- event: member.removed {addresses (those removed)}, or member.left {address}.
-- Answers one reply per removal: {removed, missing, board...} (the boards changed, 'xp' or
-- skill ids, each once), or the error.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local E, maxlen = KEYS[1], ARGV[1]

-- Board entries go last, one ZREM per board for the whole group: a board's entries leave
-- together while its skiplist's upper levels are in the CPU's caches (one removal's entries
-- are spread over as many boards as it has skills, each cold after the others).
local doomed, boards = {}, {}
local function doom(key, entry)
  local list = doomed[key]
  if not list then
    list = {}
    doomed[key] = list
    boards[#boards + 1] = key
  end
  list[#list + 1] = entry
end

local version
local function removal(a, last)
  local caller, platform, mode, now = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 4]
  local role = role_of(KEYS[2], KEYS[3], nil, caller)
  if mode == 'leave' then
    -- Anyone signed in may leave an enabled entity; a disabled one refuses owners and admins
    -- (403) and is 404 to everyone else, as every write.
    if redis.call('EXISTS', E) == 0 then return fail('NOT_FOUND', 'No such entity.') end
    if platform ~= '1' and redis.call('HGET', E, 'isEnabled') == '0' then
      if role == 'owner' or role == 'admin' then
        return fail('FORBIDDEN', 'The entity is disabled.')
      end
      return fail('NOT_FOUND', 'No such entity.')
    end
  else
    local denied = write_gate(E, role, platform, 'staff')
    if denied then return denied end
  end
  local removed, missing, list, seen, out = 0, 0, {}, {}, {}
  for i = a + 5, last do
    local addr = ARGV[i]
    local entry = redis.call('HGET', KEYS[4], addr)
    if entry then
      redis.call('HDEL', KEYS[4], addr)
      doom(KEYS[5], entry)
      local flat = redis.call('HGETALL', prog_key(E, addr))
      for j = 1, #flat, 2 do
        local f, v = flat[j], tonumber(flat[j + 1]) or 0
        local by
        if f == 'xp' then
          by = 'xp'
        elseif string.sub(f, 1, 2) == 's:' then
          by = string.sub(f, 3)
        end
        if by and v > 0 then
          doom(lb_key(E, by), lb_member(v, addr))
          if not seen[by] then
            seen[by] = true
            out[#out + 1] = by
          end
        end
      end
      removed = removed + 1
      list[removed] = jstr(addr)
    else
      missing = missing + 1
    end
  end
  if removed > 0 then
    version = ARGV[a + 3]
    if mode == 'leave' then
      emit(E, maxlen, 'member.left', now, caller, '{"address":' .. list[1] .. '}')
    else
      emit(E, maxlen, 'member.removed', now, caller, '{"addresses":[' ..
        table.concat(list, ',') .. ']}')
    end
  end
  table.insert(out, 1, missing)
  table.insert(out, 1, removed)
  return out
end

local replies, a = {}, 3
for i = 1, tonumber(ARGV[2]) do
  local nargs = tonumber(ARGV[a + 1])
  replies[i] = removal(a + 2, a + 1 + nargs)
  a = a + 2 + nargs
end
-- A deleted skill's board is gone: ZREM on a missing key creates nothing.
for _, key in ipairs(boards) do
  local list = doomed[key]
  for from = 1, #list, 500 do
    redis.call('ZREM', key, unpack(list, from, math.min(from + 499, #list)))
  end
end
if version then redis.call('HSET', E, 'membersVersion', version) end
return replies
