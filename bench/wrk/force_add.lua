-- force_add.lua: POST force-add batches of fresh member addresses, one batch per request.
-- usage: wrk ... -s bench/wrk/force_add.lua http://127.0.0.1:PORT -- PATH [BATCH]
-- PATH is /api/entities/{id}/force-add?address=…&signature=… (an owner's), BATCH 100 by
-- default. Addresses are 0x + 8 hex digits unique to this run and thread + 8 hex digits of a
-- request counter + 24 decimal digits of the position: never seen before, all lowercase.
-- done() prints the same WRK_RESULT line as paths.lua.
local path, batch, prefix
local counter = 0

function init(args)
  path = assert(args[1], "PATH is required")
  batch = tonumber(args[2] or "100")
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  prefix = math.random(0, 0x7fffffff)
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local a = {}
  for j = 1, batch do
    a[j] = string.format('"0x%08x%08x%024d"', prefix, counter, j)
  end
  local body = '{"addresses":[' .. table.concat(a, ",") .. '],"Chain":"eth"}'
  return wrk.format("POST", path, nil, body)
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
