#!/usr/bin/env python3
"""fixed_work.py: a control for SLOWLOG's long entries: a script of fixed work, run beside a load.

usage: fixed_work.py PORT SECONDS WORK_US PAUSE_FACTOR

Calibrates a Lua loop on the Redis at 127.0.0.1:PORT to about WORK_US of Redis's time (the
median of its runs), then runs it for SECONDS, waiting PAUSE_FACTOR times each run's time
before the next (as the board rebuild's steps are paced, DECISIONS.md). Each run times itself
with TIME at its start and end, the wall clock SLOWLOG uses. The work is the same in every
run, so a run much longer than the median was held by the machine, not by its work: the
share of such runs is what the machine alone does to a command of that length. Prints one
line: the loop's turns, the median, and the runs over 1 ms and 3 ms, the p99 and the longest.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

SCRIPT = b"""local t0 = redis.call('TIME')
local x = 0
for i = 1, tonumber(ARGV[1]) do x = x + i % 7 end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
"""


def main():
    port, seconds, work_us, factor = (int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
                                      float(sys.argv[4]))
    r = Redis(port)
    sha = r.call('SCRIPT', 'LOAD', SCRIPT)
    turns = 1000
    for _ in range(6):  # bounded: each round scales the loop to the target
        median = statistics.median(r.call('EVALSHA', sha, '0', str(turns)) for _ in range(15))
        turns = max(1, int(turns * work_us / max(median, 1)))
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        us = r.call('EVALSHA', sha, '0', str(turns))
        times.append(us)
        time.sleep(us * factor / 1e6)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else 0
    print('fixed work of %d loop turns, median %d µs: %d runs, %d over 1 ms, %d over 3 ms, '
          'p99 %d µs, the longest %d µs' % (
              turns, statistics.median(times) if times else 0, len(times),
              sum(1 for t in times if t > 1000), sum(1 for t in times if t > 3000), p99,
              times[-1] if times else 0))


if __name__ == '__main__':
    main()
