-- write_check: the read-only gate asked before anything is written ahead of an entity's write
-- script (CONTRACT §12: a refused write leaves no trace). It answers what that script's own
-- gate would answer now; the script asks again, so a role taken away in between still refuses
-- (and the caller then removes what it wrote ahead). Writes nothing.
-- KEYS: entity, owners, admins, members
-- ARGV: caller, platform ('1' or '0'), who ('owners', 'staff' or 'leave': write_gate's), the
--       role the addresses below take ('o', 'a', 'm' or '' for none), then the addresses
-- Returns the gate's error, or {the entity's name, then per address 1 if it holds that role
-- already, else 0}: index entries are written only for addresses that gain the role.
local denied = write_open(nil, ARGV[3])
if denied then return denied end
local out = {redis.call('HGET', KEYS[1], 'name') or ''}
local letter = ARGV[4]
for i = 5, #ARGV do
  local held = 0
  if letter == 'o' then
    held = redis.call('SISMEMBER', KEYS[2], ARGV[i])
  elseif letter == 'a' then
    held = redis.call('SISMEMBER', KEYS[3], ARGV[i])
  elseif letter == 'm' then
    held = redis.call('HEXISTS', KEYS[4], ARGV[i])
  end
  out[#out + 1] = held
end
return out
