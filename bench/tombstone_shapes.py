"""tombstone_shapes: what a removal's 11 tombstones cost Redis in three shapes of tombstone set,
straight in Redis, no HTTP. For issue 27's removal target: the removal writes one tombstone per
board the member is on (members_remove.lua), and behind a backlog each lands at a random place
of a set of that backlog's size.

Each workload is one script call writing 11 tombstones (one per board) for a random address and
random values, timed by INFO commandstats (usec_per_call of EVALSHA and of ZADD), after CONFIG
RESETSTAT:
  lex      today's shape: "<16-digit inverted value>:<address>" at score 0, 11 sets of BACKLOG
  score    the address scored by its value (minus it, so that ties order by address as now),
           11 sets of BACKLOG
  pieces   today's shape, in pieces of at most 128 entries taken in removal order (a new piece
           every 128 removals), so each stays in Redis's compact encoding: the insert costs the
           same whatever the backlog, and a read would count across every piece
Each workload runs twice, alternating, on sets that grow as it runs.

  tombstone_shapes.py --redis-port P [--backlog 80000] [--calls 20000]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

FILL = """
for b = 1, 11 do
  for i = 1, tonumber(ARGV[1]) do
    local v = math.random(1, 100000000)
    local a = string.format('0x%040d', math.random(1, 2000000000)) .. ARGV[2] .. i
    redis.call('ZADD', 'lex:' .. b, 0, string.format('%016d', 9999999999999999 - v) .. ':' .. a)
    redis.call('ZADD', 'score:' .. b, -v, a)
  end
end
return 1"""

# ARGV: 11 values, the address, the call's number
SHAPES = {
    "lex": """for b = 1, 11 do
  redis.call('ZADD', 'lex:' .. b, 0,
    string.format('%016d', 9999999999999999 - tonumber(ARGV[b])) .. ':' .. ARGV[12])
end
return 1""",
    "score": """for b = 1, 11 do redis.call('ZADD', 'score:' .. b, -tonumber(ARGV[b]), ARGV[12]) end
return 1""",
    "pieces": """local piece = math.floor(tonumber(ARGV[13]) / 128)
for b = 1, 11 do
  redis.call('ZADD', 'piece:' .. b .. ':' .. piece, 0,
    string.format('%016d', 9999999999999999 - tonumber(ARGV[b])) .. ':' .. ARGV[12])
end
return 1""",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--backlog", type=int, default=80000)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    r = Redis(a.redis_port)
    rnd = random.Random(1)
    for n in range(0, a.backlog, 10000):
        r.call("EVAL", FILL, "0", str(min(10000, a.backlog - n)), ":%d:" % n)
    shas = {k: r.call("SCRIPT", "LOAD", v).decode() for k, v in SHAPES.items()}
    number = 0
    for name in ("lex", "score", "pieces", "lex", "score", "pieces"):
        r.call("CONFIG", "RESETSTAT")
        for _ in range(a.calls):
            number += 1
            vals = [str(rnd.randint(1, 100000000)) for _ in range(11)]
            r.call("EVALSHA", shas[name], "0", *vals, "0x%040x" % rnd.getrandbits(160),
                   str(number))
        s = r.commandstats()
        last = "piece:1:%d" % (number // 128) if name == "pieces" else name + ":1"
        print("%-6s a call of 11 tombstones %6.1f µs, a ZADD %5.2f µs; each set now %d entries"
              % (name, s["evalsha"][0], s["zadd"][0], r.call("ZCARD", last)))


if __name__ == "__main__":
    main()
