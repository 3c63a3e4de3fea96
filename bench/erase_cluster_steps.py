"""erase_cluster_steps: an erasure's steps on a Redis Cluster node (or, --single, on a single
Redis), the step script of this tree against the one of an earlier commit, on the same node in
turn. It measures and prints; it asserts nothing about timings.

  erase_cluster_steps.py --before REV [--single] [--erasures K] [--entity-keys N]
                         [--node-keys F] [--count 125] [--rounds 2]

Starts one private redis-server on a free loopback port, with cluster support and owning every
slot (a cluster of one primary: a step runs on the primary holding the entity's slot, so one
node is what a step sees) or, with --single, without; stopped by its PID at the end. Each
round, for each script: the node is flushed; F other keys are made (on a cluster DEBUG
POPULATE's, spread over every slot; on a single Redis keys of live entities, 10 each, which the
shared scan of a single Redis must read past) and an entity of N keys straight in Redis
(progress hashes under its hash tag, as a deleted entity's members leave them) with its erasure
record (K such entities with --erasures, on a single Redis listed in erase:ids as their delete
lists them); erase_step.lua then runs with no pause until it answers DONE, for one erasure after
the other, as one instance runs them. Prints, per run: steps, seconds, Redis's time in the
steps (INFO commandstats), a step's wall time by SLOWLOG (p50, p99, longest), and that no key
of the entities is left and the F other keys are all there.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LUA = "service/redis/lua"


def source(rev, name):
    if rev is None:
        with open(os.path.join(ROOT, LUA, name)) as f:
            return f.read()
    return subprocess.run(["git", "-C", ROOT, "show", "%s:%s/%s" % (rev, LUA, name)],
                          check=True, capture_output=True, text=True).stdout


def script(rev):
    return source(rev, "_prelude.lua") + source(rev, "erase_step.lua")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(tmp, single):
    port = free_port()
    cluster = [] if single else ["--cluster-enabled", "yes", "--cluster-config-file",
                                 os.path.join(tmp, "nodes.conf")]
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "",
         "--appendonly", "no", "--enable-debug-command", "local"] + cluster,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            r = Redis(port)
            r.call("PING")
            break
        except (OSError, ConnectionError):
            time.sleep(0.05)
    else:
        raise RuntimeError("redis-server did not start")
    if single:
        return proc, r
    r.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    for _ in range(400):
        if b"cluster_state:ok" in r.call("CLUSTER", "INFO"):
            return proc, r
        time.sleep(0.05)
    raise RuntimeError("the cluster did not come up")


def evalsha_usec(r):
    for line in r.call("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("usec=")[1].split(",")[0])
    return 0


def run(r, sha, n, f, count, single, erasures):
    r.call("FLUSHALL")
    if single:
        for lo in range(0, f, 10000):
            r.call("EVAL", "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('SET', "
                   "string.format('ent:{c-live%08d}:k%d', math.floor(i / 10), i % 10), 'x') end",
                   "0", str(lo), str(min(f, lo + 10000) - 1))
    else:
        r.call("DEBUG", "POPULATE", str(f), "nobody")
    ents = ["ent:{c-0123456789abcdef0123456789ab%04d}" % i for i in range(erasures)]
    for E in ents:
        for lo in range(0, n, 10000):
            r.call("EVAL", "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('HSET', "
                   "KEYS[1] .. ':prog:0x' .. string.format('%040d', i), 'xp', '1') end",
                   "1", E, str(lo + 1), str(min(n, lo + 10000)))
    for E in ents:  # as entity_delete.lua leaves them (the set only on a single Redis)
        t = r.call("TIME")
        r.call("HSET", E + ":erasure", "deletedAt", "1970-01-01T00:00:00.000Z", "deletedRedisMs",
               str(int(t[0]) * 1000 + int(t[1]) // 1000))
        if single:
            r.call("SADD", "erase:ids", E[5:-1])
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    r.call("CONFIG", "SET", "slowlog-max-len", "1000000")
    r.call("SLOWLOG", "RESET")
    u0, t0, steps, res = evalsha_usec(r), time.monotonic(), 0, None
    for E in ents:  # one worker, one erasure after the other, as an instance runs them
        while time.monotonic() - t0 < 1800:
            res = r.call("EVALSHA", sha, "1", E + ":erasure", E, "bench-steps", "60000",
                         str(count), "", "erase:scan", "erase:ids")
            steps += 1
            if res[0] == b"DONE":
                break
    E = ents[0][:-5]  # the prefix of them all, for the count of what is left
    secs, usec = time.monotonic() - t0, evalsha_usec(r) - u0
    wall = sorted(e[2] for e in r.call("SLOWLOG", "GET", "1000000")
                  if e[3][0].upper() == b"EVALSHA")
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    left = len(r.call("KEYS", E + "*"))
    dbsize = r.call("DBSIZE") - r.call("EXISTS", "erase:scan") - r.call("EXISTS", "erase:ids")
    return steps, secs, usec, wall, left, dbsize, res[0].decode() if res else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the commit whose step script is compared")
    ap.add_argument("--entity-keys", type=int, default=20)
    ap.add_argument("--node-keys", type=int, default=1000000)
    ap.add_argument("--count", type=int, default=125)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--single", action="store_true", help="a single Redis, not a cluster node")
    ap.add_argument("--erasures", type=int, default=1, help="entities of N keys deleted together")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="erase-cluster-")
    proc, r = start_node(tmp, a.single)
    try:
        shas = [(name, r.call("SCRIPT", "LOAD", script(rev)).decode())
                for name, rev in (("before (%s)" % a.before, a.before), ("this tree", None))]
        print("%s: %d entities of %d keys deleted together, %d other keys on the node, "
              "ERASE_STEP_KEYS %d" % ("a single Redis" if a.single else "a cluster node",
                                      a.erasures, a.entity_keys, a.node_keys, a.count))

        def q(v, p):
            return v[min(len(v) - 1, int(len(v) * p))] / 1000 if v else 0
        for rnd in range(a.rounds):
            for name, sha in shas:
                steps, secs, usec, wall, left, dbsize, last = run(r, sha, a.entity_keys,
                                                                  a.node_keys, a.count,
                                                                  a.single, a.erasures)
                print("round %d, %s: %s after %d steps in %.2f s; Redis in the steps %.1f ms "
                      "(%.1f µs a step); a step's wall time p50 %.3f ms, p99 %.3f ms, longest "
                      "%.3f ms; keys of the entity left %d, DBSIZE %d (%s)" % (
                          rnd + 1, name, last, steps, secs, usec / 1000, usec / max(steps, 1),
                          q(wall, .5), q(wall, .99), q(wall, 1), left, dbsize,
                          "all kept" if dbsize == a.node_keys else "OTHER KEYS LOST"))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
