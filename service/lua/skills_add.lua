-- skills_add: adds skills as an owner or admin, all or nothing; names are unique per entity
-- (compared by their normalized form: trimmed, ASCII case folded).
-- KEYS: entity, owners, admins, skills, skill order, skill names
-- ARGV: caller, platform, createdAt (ms), then per skill: id, normalized name, record (JSON)
-- Returns the records in request order. Order scores are createdAt * 1000 + position, so a
-- batch keeps its request order (exact in a double until the year 2255).
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'staff')
if denied then return denied end
local seen = {}
for i = 4, #ARGV, 3 do
  local norm = ARGV[i + 1]
  if seen[norm] or redis.call('HEXISTS', KEYS[6], norm) == 1 then
    return fail('CONFLICT', 'A skill with that name exists in this entity.')
  end
  seen[norm] = true
end
local out = {}
local base = tonumber(ARGV[3]) * 1000
for i = 4, #ARGV, 3 do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
  redis.call('HSET', KEYS[6], ARGV[i + 1], ARGV[i])
  redis.call('ZADD', KEYS[5], base + #out, ARGV[i])
  out[#out + 1] = ARGV[i + 2]
end
return out
