-- paths.lua: GET requests cycling through a file of paths (one per line, query included).
-- usage: wrk -t1 -c64 -d10s --latency -s bench/wrk/paths.lua http://127.0.0.1:PORT -- PATHS_FILE [HEADER]
-- HEADER, "Name: value", goes on every request (scripts/bench-session: a Bearer token).
-- Requests are formatted once in init; each connection's thread starts at a random line.
-- done() prints one machine-readable line, "WRK_RESULT key=value ...", for scripts/bench.
local reqs = {}
local i = 0

function init(args)
  if args[2] then
    local name, value = args[2]:match("^([^:]+):%s*(.*)$")
    assert(name, "HEADER must be Name: value")
    wrk.headers[name] = value
  end
  local f = assert(io.open(args[1], "r"), "cannot open the paths file")
  for line in f:lines() do
    if #line > 0 then
      reqs[#reqs + 1] = wrk.format("GET", line)
    end
  end
  f:close()
  assert(#reqs > 0, "the paths file is empty")
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  i = math.random(#reqs) - 1
end

function request()
  i = i % #reqs + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
    "errors_status=%d errors_socket=%d bytes=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.status, e.connect + e.read + e.write + e.timeout, summary.bytes))
end
