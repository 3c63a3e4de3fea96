"""erase_steps: the erasure's steps one by one against a seeded entity, each timed by Redis's
main thread's on-CPU time (schedstat), which preemption does not inflate, beside SLOWLOG's wall
time of the same EVALSHA. For scripts/bench-erase, on its Redis once nothing else runs there.

  erase_steps.py --redis-port P --redis-pid PID --entity c-… [--count 125] [--pause-ms 2]

The entity is deleted with entity_delete.lua as a platform admin, then erase_step.lua runs until
it answers DONE, with the given SCAN COUNT (ERASE_STEP_KEYS) and pause. Prints one line per
measure: steps, seconds, percentiles of the on-CPU and wall time of a step, SLOWLOG entries over
5 ms, and DBSIZE after (the entity's keys gone).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "redis", "lua")


def script(name):
    with open(os.path.join(LUA, "_prelude.lua")) as f:
        prelude = f.read()
    with open(os.path.join(LUA, name)) as f:
        return prelude + f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-pid", type=int, required=True)
    ap.add_argument("--entity", required=True)
    ap.add_argument("--count", default="125")
    ap.add_argument("--pause-ms", type=float, default=2)
    a = ap.parse_args()
    r = Redis(a.redis_port)
    E = "ent:{%s}" % a.entity
    rec = E + ":erasure"

    def oncpu():
        with open("/proc/%d/task/%d/schedstat" % (a.redis_pid, a.redis_pid)) as f:
            return int(f.read().split()[0])

    r.call("EVAL", script("entity_delete.lua"), "4", E, E + ":owners", E + ":admins", rec,
           "0x" + "0" * 40, "1", "", "0", "1970-01-01T00:00:00.000Z")
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    r.call("CONFIG", "SET", "slowlog-max-len", "100000")
    r.call("SLOWLOG", "RESET")
    sha = r.call("SCRIPT", "LOAD", script("erase_step.lua")).decode()
    cpu, t0, res, released = [], time.monotonic(), None, ""
    while time.monotonic() - t0 < 600:
        c0 = oncpu()
        res = r.call("EVALSHA", sha, "1", rec, E, "bench-steps", "60000", a.count, released,
                     "erase:scan", "erase:ids")  # as jobs/erasure.c sends it
        cpu.append((oncpu() - c0) / 1000.0)
        if res[0] == b"DONE":
            break
        if res[0] == b"RELEASE":  # the worker releases the alias claim (its own slot) here
            released = res[4].decode()
        time.sleep(a.pause_ms / 1000.0)
    secs = time.monotonic() - t0
    wall = sorted(e[2] for e in r.call("SLOWLOG", "GET", "100000") if e[3][0].upper() == b"EVALSHA")
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "5000")
    cpu.sort()

    def q(v, f):
        return v[min(len(v) - 1, int(len(v) * f))] if v else 0
    print("steps %d (COUNT %s, pause %g ms) in %.1f s, %s; a step on Redis's CPU: p50 %.2f ms, "
          "p99 %.2f ms, max %.2f ms; its wall time (SLOWLOG): p50 %.2f ms, p99 %.2f ms, max %.2f "
          "ms, %d of %d over 5 ms; DBSIZE after %d" % (
              len(cpu), a.count, a.pause_ms, secs, res[0].decode() if res else "-",
              q(cpu, .5) / 1000, q(cpu, .99) / 1000, cpu[-1] / 1000, q(wall, .5) / 1000,
              q(wall, .99) / 1000, (wall[-1] if wall else 0) / 1000,
              sum(1 for w in wall if w > 5000), len(wall), r.call("DBSIZE")))


if __name__ == "__main__":
    main()
