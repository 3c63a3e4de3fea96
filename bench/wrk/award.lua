-- award.lua: POST one contribution per request, score 1 in one skill, to members cycled through.
-- usage: wrk ... -s bench/wrk/award.lua http://127.0.0.1:PORT -- PATH MEMBERS_FILE SKILL_ID... [HEADER]
-- PATH is /api/entities/{id}/contributions?address=…&signature=… (an owner's), or without the
-- query when HEADER, "Name: value" (an argument with ": " in it, as no skill id has), signs the
-- requests in (scripts/bench-session: a Bearer API key); MEMBERS_FILE holds
-- members of that entity, one address a line. Request n awards member n mod M and skill
-- (n + n div M) mod S, so every member gets every skill in turn; the title carries a number
-- unique to this run and thread and the request counter, so no two bodies are alike.
-- done() prints the same WRK_RESULT line as paths.lua.
local path
local members, skills = {}, {}
local counter, prefix = 0, 0

function init(args)
  path = assert(args[1], "PATH is required")
  local f = assert(io.open(assert(args[2], "MEMBERS_FILE is required"), "r"),
    "cannot open the members file")
  for line in f:lines() do
    if #line > 0 then members[#members + 1] = line end
  end
  f:close()
  for i = 3, #args do
    local name, value = args[i]:match("^([%w-]+):%s+(.*)$")
    if name then
      wrk.headers[name] = value
    else
      skills[#skills + 1] = args[i]
    end
  end
  assert(#members > 0 and #skills > 0, "members and skills are required")
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  prefix = math.random(0, 0x7fffffff)
  counter = math.random(0, #members - 1)
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local m = members[counter % #members + 1]
  local s = skills[(counter + math.floor(counter / #members)) % #skills + 1]
  local body = string.format(
    '{"member":"%s","skills":[{"skillId":"%s","score":1}],"title":"bench award %08x-%d"}',
    m, s, prefix, counter)
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
