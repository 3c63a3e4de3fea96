-- force_add: adds members as an owner or admin, all or nothing; present members keep their
-- record. KEYS: entity, owners, admins, members, member order
-- ARGV: caller, platform, chain, addedAt (ms, 16 digits zero-padded), a fresh random version,
--       events_max, now (ISO), most members the entity may hold, address... (lowercase,
--       deduplicated). Returns {added, existing, board...}; FULL when the new members would
--       pass the most (nothing added). The boards are those a re-added member went back on
--       ('xp' or skill ids, each once: member_boards), for the service's read cache.
-- An add that adds someone writes a member.added event {addresses (those added), chain}.
-- An add that changes the member list stores the version in the entity's membersVersion:
-- cached users pages are valid only under the version they were rendered from.
-- A member is one compact entry, "<addedAt>:<address>:<addedBy>:<chain>", kept both as the
-- hash value and as the order member; entityd renders the JSON (keys.h).
local denied = write_open(KEYS[4], 'staff')
if denied then return denied end
local full = add_past_most(KEYS[4], true, 9, ARGV[8], 'members')
if full then return full end
local added, existing, list, boards, out = 0, 0, {}, {}, {}
-- the skill tree (board_tree), read once and only for a member added again with progress
local tree, tree_read
local function tree_of(even_flat)
  if not tree_read then
    tree_read = true
    tree = board_tree_read(KEYS[1])
  end
  if not tree and even_flat then
    return board_tree(redis.call('HGET', KEYS[1], 'progtpl'), true)
  end
  return tree
end
local tail = ':' .. ARGV[1] .. ':' .. ARGV[3]
for i = 9, #ARGV do
  local a = ARGV[i]
  local entry = ARGV[4] .. ':' .. a .. tail
  if redis.call('HSETNX', KEYS[4], a, entry) == 1 then
    redis.call('ZADD', KEYS[5], 0, entry)
    added = added + 1
    list[added] = jstr(a)
    -- a member removed before comes back on the boards with the XP and scores it kept, its
    -- entries still waiting for the sweeper taken back (member_boards). A removal by an earlier
    -- version left a sweep record instead: its tombstones go with it, and an entry its progress
    -- no longer holds (a revocation since) goes too.
    local rec = sweep_record(KEYS[1], a)
    if rec then
      local pk = prog_key(KEYS[1], a)
      for by, inv in string.gmatch(rec, ' ([^ =]+)=(%d+)') do
        local e = inv .. ':' .. a
        redis.call('ZREM', gone_key(KEYS[1], by), e)
        local v
        if by == 'xp' then
          v = tonumber(redis.call('HGET', pk, 'xp')) or 0
        else -- its total once a skill below gave it one (board_value)
          local got = redis.call('HMGET', pk, 't:' .. by, 's:' .. by)
          v = tonumber(got[1] or got[2] or '0') or 0
        end
        if v <= 0 or lb_inv(v) ~= inv then redis.call('ZREM', lb_key(KEYS[1], by), e) end
      end
      redis.call('ZREM', KEYS[1] .. ':sweep', rec)
    end
    for _, by in ipairs(member_boards(KEYS[1], a, tree_of)) do
      if not boards[by] then
        boards[by] = true
        out[#out + 1] = by
      end
    end
  else
    existing = existing + 1
  end
end
if added > 0 then
  redis.call('HSET', KEYS[1], 'membersVersion', ARGV[5])
  emit(KEYS[1], ARGV[6], 'member.added', ARGV[7], ARGV[1], '{"addresses":[' ..
    table.concat(list, ',') .. '],"chain":' .. jstr(ARGV[3]) .. '}')
end
table.insert(out, 1, existing)
table.insert(out, 1, added)
return out
