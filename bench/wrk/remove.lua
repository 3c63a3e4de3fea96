-- remove.lua: DELETE one member per request, each request a member not removed before.
-- usage: wrk ... -s bench/wrk/remove.lua http://127.0.0.1:PORT -- ENTITY_PATH QUERY MEMBERS_FILE
--        STATE_FILE
-- ENTITY_PATH is /api/entities/{id}; QUERY an owner's "address=…&signature=…"; MEMBERS_FILE
-- holds members of that entity, one address a line. STATE_FILE holds the line the next run
-- starts at (absent: 0): done() moves it past every request this run made, so that a
-- warm-up and the measured run never remove one member twice (a second removal finds nothing
-- to do, and would flatter the rate).
-- done() prints the same WRK_RESULT line as paths.lua.
local prefix, query
local members = {}
-- globals: done() reads them from the thread (thread:get sees globals only)
rm_state, rm_start, rm_counter = nil, 0, 0

local function read_start(path)
  local f = io.open(path, "r")
  if not f then return 0 end
  local n = tonumber(f:read("*l") or "0") or 0
  f:close()
  return n
end

function init(args)
  prefix = assert(args[1], "ENTITY_PATH is required") .. "/members/"
  query = "?" .. assert(args[2], "QUERY is required")
  local f = assert(io.open(assert(args[3], "MEMBERS_FILE is required"), "r"),
    "cannot open the members file")
  for line in f:lines() do
    if #line > 0 then members[#members + 1] = line end
  end
  f:close()
  rm_state = assert(args[4], "STATE_FILE is required")
  rm_start = read_start(rm_state)
  assert(rm_start < #members, "every member in the file was removed already")
end

function request()
  local m = members[(rm_start + rm_counter) % #members + 1]
  rm_counter = rm_counter + 1
  return wrk.format("DELETE", prefix .. m .. query)
end

-- done() runs in the main Lua state, which init() never saw: the thread (run with -t1) tells
-- where it started and how many requests it made, those in flight at the end included.
local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests)
  local t = assert(threads[1], "no thread")
  local f = assert(io.open(t:get("rm_state"), "w"))
  f:write(string.format("%d\n", t:get("rm_start") + t:get("rm_counter")))
  f:close()
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
    "errors_status=%d errors_socket=%d bytes=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.status, e.connect + e.read + e.write + e.timeout, summary.bytes))
end
