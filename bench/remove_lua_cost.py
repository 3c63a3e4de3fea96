"""remove_lua_cost: the Lua alone of a members_remove.lua group, inside Redis, no data.

For issue 27's removal target: how much of a removal's Redis time is the script's own Lua (the
rest being the commands it runs, mostly the tombstones' inserts). Each FILE (a version of
service/redis/lua/members_remove.lua; the service's prelude is prepended, as the service does)
runs inside one EVAL with redis.call replaced by canned replies: the entity enabled, the caller
an owner, every address a member, a prog hash of XP, 10 skills and 5 levels reached with
values that differ from member to member (so the values' strings are made as in a real group),
every write answered at once. An EVAL runs --groups groups of 20 removals of one member each;
INFO commandstats gives its time (usec_per_call of EVALSHA), printed per removed member. The
files run in turn, three rounds. The stubs' own work (building the canned replies) is in the
figure too, about as much as Redis's turning real replies into Lua values.

  remove_lua_cost.py --redis-port P [--groups 50] FILE [FILE ...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "redis", "lua")

STUB = r"""
local real = redis
local counter = 0
local SK = {}
for i = 0, 9 do SK[#SK + 1] = string.format('s-00000000-0000-4000-8000-%012d', i) end
local function value(c, k)
  return tostring((c * 7919 + k * 104729) % (k == 0 and 10000 or 1000) + 1)
end
local stub = {error_reply = real.error_reply}
function stub.pcall() return 0 end
function stub.call(cmd, key, ...)
  local n, out = select('#', ...), {}
  if cmd == 'EXISTS' or cmd == 'SISMEMBER' then return 1 end
  if cmd == 'HGET' then return '1' end
  if cmd == 'HLEN' then return #SK end
  if cmd == 'HKEYS' then return SK end
  if cmd == 'XADD' then return '1-0' end
  if cmd == 'HGETALL' then
    counter = counter + 1
    out = {'xp', value(counter, 0)}
    for k, s in ipairs(SK) do out[#out + 1], out[#out + 2] = 's:' .. s, value(counter, k) end
    for k = 1, 5 do out[#out + 1], out[#out + 2] = 'r:l-' .. k, '2026-01-01T00:00:00.000Z' end
    return out
  end
  if cmd == 'HMGET' then
    if string.find(key, ':prog:', 1, true) then
      counter = counter + 1
      for k = 1, n do out[k] = value(counter, k - 1) end
    elseif string.find(key, ':skills', 1, true) then
      for k = 1, n do out[k] = '{}' end
    else
      for k = 1, n do out[k] = '0000001700000000:' .. select(k, ...) .. ':0xowner:eth' end
    end
    return out
  end
  return 1
end
local redis = stub
local function group(KEYS, ARGV)
"""

DRIVER = r"""
end
local base = tonumber(ARGV[1])
local owner = '0x' .. string.rep('11', 20)
for g = 1, tonumber(ARGV[2]) do
  local args = {'100000', '2026-01-01T00:00:00.000Z', '20'}
  for m = 1, 20 do
    for _, x in ipairs({'0', '5', owner, '0', 'remove', 'v1',
                        string.format('0x%040x', base + g * 20 + m)}) do
      args[#args + 1] = x
    end
  end
  group({'ent:{c}', 'ent:{c}:owners', 'ent:{c}:admins', 'ent:{c}:members',
         'ent:{c}:members:order', 'ent:{c}:lb:xp'}, args)
end
return counter
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("files", nargs="+")
    o = ap.parse_args()
    with open(os.path.join(LUA, "_prelude.lua")) as f:
        prelude = f.read()
    r = Redis(o.redis_port)
    shas = {}
    for path in o.files:
        with open(path) as f:
            body = STUB + prelude + "\n" + f.read() + DRIVER
        shas[path] = r.call("SCRIPT", "LOAD", body).decode()
    for rnd in range(3):
        for path in o.files:
            r.call("CONFIG", "RESETSTAT")
            for i in range(40):
                r.call("EVALSHA", shas[path], "0", str(i * 100000), str(o.groups))
            us, _ = r.commandstats()["evalsha"]
            print("round %d, %s: %.2f µs of Lua a removed member" % (
                rnd + 1, path, us / (o.groups * 20)))


if __name__ == "__main__":
    main()
