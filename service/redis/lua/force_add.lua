-- force_add: adds members as an owner or admin, all or nothing; present members keep their
-- record, except a member who joined by rules, who becomes a manual member (its entry written
-- again by this add, keeping its addedAt; off the entity's join:due and join:failing).
-- KEYS: entity, owners, admins, members, member order
-- ARGV: caller, platform, chain, addedAt (ms, 16 digits zero-padded), a fresh random version,
--       events_max, now (ISO), most members the entity may hold, address... (lowercase,
--       deduplicated). Returns {added, existing, board...}; FULL when the new members would
--       pass the most (nothing added). The boards are those a re-added member went back on
--       ('xp' or skill ids, each once: member_boards), for the service's read cache.
-- An add that adds someone writes a member.added event {addresses (those added), chain}.
-- An add that changes the member list stores the version in the entity's membersVersion:
-- cached users pages are valid only under the version they were rendered from.
-- A member is one compact entry, "<addedAt>:<address>:<addedBy>:<chain>[:rules]", kept both as the
-- hash value and as the order member; entityd renders the JSON (keys.h).
local denied = write_open(KEYS[4], 'staff')
if denied then return denied end
local full = add_past_most(KEYS[4], true, 9, ARGV[8], 'members')
if full then return full end
local added, existing, list, boards, out = 0, 0, {}, {}, {}
local tree_of = tree_reader(KEYS[1])
local tail = ':' .. ARGV[1] .. ':' .. ARGV[3]
local manual = {} -- rules members this add makes manual
for i = 9, #ARGV do
  local a = ARGV[i]
  local entry = ARGV[4] .. ':' .. a .. tail
  if redis.call('HSETNX', KEYS[4], a, entry) == 1 then
    redis.call('ZADD', KEYS[5], 0, entry)
    added = added + 1
    list[added] = jstr(a)
    member_back(KEYS[1], a, tree_of, boards, out)
  else
    existing = existing + 1
    -- a member who joined by rules (its entry's 5th field) becomes a manual one: its entry is
    -- written again as this add's, at its place in the order, and it is no longer re-checked
    local old = redis.call('HGET', KEYS[4], a)
    if string.sub(old, -6) == ':rules' then
      local again = string.sub(old, 1, 60) .. ARGV[1] .. ':' .. ARGV[3]
      redis.call('HSET', KEYS[4], a, again)
      redis.call('ZREM', KEYS[5], old)
      redis.call('ZADD', KEYS[5], 0, again)
      manual[#manual + 1] = a
    end
  end
end
if #manual > 0 then join_forget(KEYS[1], manual) end
if added > 0 or #manual > 0 then
  redis.call('HSET', KEYS[1], 'membersVersion', ARGV[5])
end
if added > 0 then
  emit(KEYS[1], ARGV[6], 'member.added', ARGV[7], ARGV[1], '{"addresses":[' ..
    table.concat(list, ',') .. '],"chain":' .. jstr(ARGV[3]) .. '}')
end
table.insert(out, 1, existing)
table.insert(out, 1, added)
return out
