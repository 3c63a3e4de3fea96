-- join_facts: what the level and role leaves of a join rule (CONTRACT section 16) need from one
-- entity, for up to 500 addresses (jobs/joineval.h). Read-only.
-- KEYS: entity, owners, admins, members, levels:gen (keys.h)
-- ARGV: the rule's author, platform ('1' when the author is a platform admin), want roles
--       ('1'/'0'), the number of level ids n, the n level ids, then the addresses.
-- The author must still be able to read the entity (CONTRACT section 3: a disabled one its
-- owners, a private one its owners, admins and members): otherwise, or when it is gone, the
-- answer is {0} and every leaf naming it is false, so a rule cannot tell who belongs to an
-- entity its author may not see.
-- Returns {1, then per address its role ('owner', 'admin', 'member' or '') when roles are
-- wanted, then per address and level id the reachedAt ms ('' when not reached)}.
local E = KEYS[1]
local head = redis.call('HMGET', E, 'id', 'isEnabled', 'public')
if not head[1] then return {0} end
local author, platform = ARGV[1], ARGV[2] == '1'
if not platform then
  local role = role_of(KEYS[2], KEYS[3], KEYS[4], author)
  if head[2] == '0' then
    if role ~= 'owner' then return {0} end
  elseif head[3] == '0' and role == '' then
    return {0}
  end
end
local want_roles, nlv = ARGV[3] == '1', tonumber(ARGV[4])
local from = 5 + nlv
-- a level of generation g > 0 keeps its reachedAt as "r:<id>:<g>" (_prelude.lua, progtpl_build)
local fields = {}
for i = 1, nlv do
  local id = ARGV[4 + i]
  local g = redis.call('HGET', KEYS[5], id)
  fields[i] = (g and g ~= '0') and ('r:' .. id .. ':' .. g) or ('r:' .. id)
end
local out = {1}
if want_roles then
  for i = from, #ARGV do out[#out + 1] = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[i]) end
end
if nlv > 0 then
  for i = from, #ARGV do
    local got = redis.call('HMGET', prog_key(E, ARGV[i]), unpack(fields))
    for j = 1, nlv do out[#out + 1] = got[j] or '' end
  end
end
return out
