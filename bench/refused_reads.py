"""refused_reads: what a refused read costs Redis (CONTRACT section 12, "reads check rights
first"), this tree's entityd against an earlier build's, on the same Redis data in one run. It
measures and prints; it asserts nothing about timings.

  refused_reads.py --bin BUILD_DIR --base-bin BASE_BUILD_DIR [--reads 200] [--rounds 2]

(scripts/bench-refused builds both and runs this.) Starts one private redis-server on a free
loopback port and one entityd of each build on it (--dev, READ_CACHE_MB=0: every read goes to
Redis, the worst case), each stopped by its PID at the end. Seeds, through the current build,
one private entity with a large event log and skill tree (30 force-adds of 1000 addresses; 200
skills of 5000-character descriptions). Then, each round and for each build in turn (the order
alternating by round, the other build's process stopped meanwhile): N refused reads by a stranger (403) of the entity's events
(limit=1000) and of its skill tree, one after the other on one keep-alive connection, N/10
allowed reads of each by the owner, and N allowed reads of a usual entity's (public, 11
events, 10 skills): what the check costs where it lets the read through; then, with the read
cache on (a new process of the build, its cache empty), N reads of that entity's skills by 50
signed callers in turn ("small skills cached"). For each: Redis's main-thread CPU per read (INFO cpu
used_cpu_{user,sys}_main_thread; it includes writing the answer out, which is most of a large
answer's cost), the time Redis's commands took per read (INFO commandstats after CONFIG
RESETSTAT, usec summed over every command but INFO and CONFIG: commands run inside a
transaction or a script are counted beside their EXEC or EVALSHA, on both builds), and
Redis's output bytes per read (INFO stats total_net_output_bytes).
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis  # noqa: E402

CALLERS = 50
CACHED = "small skills cached"
OWNER_KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited (%s)" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit("%s did not listen on %d" % (what, port))


class Service:
    def __init__(self, name, build, redis_port, tmp, port=None, cache_mb=0):
        self.name, self.build, self.redis_port, self.tmp = name, build, redis_port, tmp
        self.port = port or free_port()
        env = dict(os.environ, REDIS_URL="redis://127.0.0.1:%d/0" % redis_port,
                   LOG_LEVEL="warn", READ_CACHE_MB=str(cache_mb), RATE_WRITES_PER_MINUTE="0",
                   ENTITY_CREATE_PER_DAY="0", MAX_MEMBERS_PER_ENTITY="1000000000")
        self.log = open(os.path.join(tmp, name + ".log"), "ab")
        self.proc = subprocess.Popen(
            [os.path.join(build, "service", "entityd"), "--dev", "--host", "127.0.0.1",
             "--port", str(self.port)], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, name)
        deadline = time.time() + 30
        while self.get("/readyz")[0] != 200:
            if time.time() > deadline:
                sys.exit("%s not ready" % name)
            time.sleep(0.05)
        while cache_mb and self.cache().get("entityd_read_cache_enabled") != 1:
            if time.time() > deadline:
                sys.exit("%s: read cache not on" % name)
            time.sleep(0.05)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def cache(self):
        """{name: value} of the entityd_read_cache_* gauges."""
        out = {}
        for line in self.get("/metrics")[1].decode().splitlines():
            if line.startswith("entityd_read_cache") and "{" not in line:
                k, v = line.split()
                out[k] = float(v)
        return out

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        self.conn.request(method, path, data, headers)
        r = self.conn.getresponse()
        return r.status, r.read()

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def sign(build, url, extra=()):
    args = [os.path.join(build, "service", "tools", "entityd-sign"), *extra, "--url", url]
    env = dict(os.environ, ENTITYD_SIGN_KEY=OWNER_KEY)
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def must(resp, what):
    if resp[0] not in (200, 201):
        sys.exit("%s: %s %s" % (what, resp[0], resp[1][:300]))
    return json.loads(resp[1])


def seed(svc, owner, public, adds, batch, skills, description):
    body = {"name": "Guild", "description": "refused reads",
            "ownerAddresses": [owner.split("&")[0].split("=")[1]], "twitter": "",
            "discord": "", "website": "", "imageUrl": "", "public": public}
    eid = must(svc.call("POST", "/api/entities?" + owner, body), "create")["data"]["id"]
    for _ in range(adds):
        addrs = ["0x" + uuid.uuid4().hex + uuid.uuid4().hex[:8] for _ in range(batch)]
        must(svc.call("POST", "/api/entities/%s/force-add?%s" % (eid, owner),
                      {"addresses": addrs, "Chain": "eth"}), "force-add")
    for i in range(0, skills, 50):
        n = min(50, skills - i)
        must(svc.call("POST", "/api/skills/multiple?" + owner,
                      {"names": ["Skill %d" % (i + j) for j in range(n)],
                       "descriptions": [description] * n, "entityID": eid}), "skills")
    return eid


def info(r, section):
    out = {}
    for line in r.call("INFO", section).decode().splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def cpu(r):
    i = info(r, "cpu")
    return float(i["used_cpu_user_main_thread"]) + float(i["used_cpu_sys_main_thread"])


def commands_usec(r):
    total, calls = 0, 0
    for k, v in info(r, "commandstats").items():
        name = k[len("cmdstat_"):]
        if name in ("info", "config") or name.startswith("config|"):
            continue
        f = dict(kv.split("=") for kv in v.split(","))
        total += int(f["usec"])
        calls += int(f["calls"])
    return total, calls


def measure(r, svc, path, n, status):
    """path, or a list of paths taken round robin."""
    paths = path if isinstance(path, list) else [path]
    r.call("CONFIG", "RESETSTAT")
    c0 = cpu(r)
    b0 = int(info(r, "stats")["total_net_output_bytes"])
    for i in range(n):
        path = paths[i % len(paths)]
        st, body = svc.call("GET", path)
        if st != status:
            sys.exit("%s %s: %s, not %s: %s" % (svc.name, path, st, status, body[:200]))
    b1 = int(info(r, "stats")["total_net_output_bytes"])
    c1 = cpu(r)
    usec, calls = commands_usec(r)
    return {"cpu_us": (c1 - c0) * 1e6 / n, "cmd_us": usec / n, "calls": calls / n,
            "bytes": (b1 - b0) / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="this tree's build directory")
    ap.add_argument("--base-bin", required=True, help="the earlier build's directory")
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="entityd-bench-refused.")
    port = free_port()
    redis_proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    svcs = []
    try:
        wait_port(port, redis_proc, "redis-server")
        r = Redis(port)
        cur = Service("current", a.bin, port, tmp)
        svcs.append(cur)
        base = Service("base", a.base_bin, port, tmp)
        svcs.append(base)
        # The sign-in message names the instance: each build's own signatures, one stranger.
        keys = os.path.join(tmp, "stranger.key")
        auth, callers = {}, {}
        for s in svcs:
            url = "http://127.0.0.1:%d" % s.port
            if not os.path.exists(keys):
                stranger = sign(a.bin, url, ["--random", "1", "--keys-out", keys])
            else:
                stranger = sign(a.bin, url, ["--key-file", keys])
            auth[s.name] = {"owner": sign(a.bin, url), "stranger": stranger}
            callers[s.name] = sign(a.bin, url, ["--random", str(CALLERS)]).splitlines()
        t = time.time()
        eid = seed(cur, auth["current"]["owner"], False, 30, 1000, 200, "d" * 5000)
        # A usual one beside it: public, 10 events of 10 members, 10 skills.
        small = seed(cur, auth["current"]["owner"], True, 10, 10, 10, "a skill")
        print("seeded in %.1f s: large private entity: 31 events of ~44 KB, skill tree of %d "
              "bytes; small public entity: 11 events, skill tree of %d bytes" %
              (time.time() - t, len(r.call("HGET", "ent:{%s}" % eid, "skilltree") or b""),
               len(r.call("HGET", "ent:{%s}" % small, "skilltree") or b"")))
        paths = {"events": "/api/entities/%s/events?limit=1000" % eid,
                 "skills": "/api/skills?entityID=%s" % eid}
        small_paths = {"small events": "/api/entities/%s/events?limit=100" % small,
                       "small skills": "/api/skills?entityID=%s" % small}
        rows = []
        for rnd in range(a.rounds):
            order = ["base", "current"] if rnd % 2 == 0 else ["current", "base"]
            for name in order:
                svc = base if name == "base" else cur
                # The other build's process is stopped meanwhile and started again on its
                # port after: its background work (sweeps, leases) would otherwise count in
                # Redis's time beside reads that cost only a few microseconds each.
                i = svcs.index(base if svc is cur else cur)
                svcs[i].stop()
                who = auth[svc.name]
                for what, path in paths.items():
                    m = measure(r, svc, path + "&" + who["stranger"], a.reads, 403)
                    rows.append((rnd + 1, svc.name, what + " refused", m))
                    m = measure(r, svc, path + "&" + who["owner"], max(1, a.reads // 10), 200)
                    rows.append((rnd + 1, svc.name, what + " allowed", m))
                for what, path in small_paths.items():
                    m = measure(r, svc, path + "&" + who["owner"], a.reads, 200)
                    rows.append((rnd + 1, svc.name, what + " allowed", m))
                # The read cache on, a new process (its cache empty): the usual entity's skill
                # tree read by CALLERS signed wallets in turn.
                svc.stop()
                on = Service(svc.name, svc.build, svc.redis_port, svc.tmp, svc.port, 64)
                m = measure(r, on, ["%s&%s" % (small_paths["small skills"], c)
                                    for c in callers[svc.name]], a.reads, 200)
                m["cache_bytes"] = on.cache().get("entityd_read_cache_bytes", 0)
                rows.append((rnd + 1, svc.name, CACHED, m))
                on.stop()
                j = svcs.index(svc)
                svcs[j] = Service(svc.name, svc.build, svc.redis_port, svc.tmp, svc.port)
                if svc is base:
                    base = svcs[j]
                else:
                    cur = svcs[j]
                o = svcs[i]
                svcs[i] = Service(o.name, o.build, o.redis_port, o.tmp, o.port)
                if o is base:
                    base = svcs[i]
                else:
                    cur = svcs[i]
        print("%-5s %-8s %-22s %12s %12s %8s %12s" % ("round", "build", "read", "Redis CPU us",
                                                       "cmd us", "cmds", "bytes"))
        for rnd, name, what, m in rows:
            print("%-5d %-8s %-22s %12.1f %12.1f %8.1f %12.0f" %
                  (rnd, name, what, m["cpu_us"], m["cmd_us"], m["calls"], m["bytes"]))
        print("%s: read cache on, %d signed callers in turn; the cache's bytes after:" %
              (CACHED, CALLERS))
        for rnd, name, what, m in rows:
            if what == CACHED:
                print("  round %d %-8s %10.0f" % (rnd, name, m["cache_bytes"]))
        print("base/current, per round (Redis CPU per read; command time per read):")
        for rnd in range(1, a.rounds + 1):
            for what in ("events refused", "skills refused", "events allowed",
                         "skills allowed", "small events allowed", "small skills allowed",
                         CACHED):
                got = {n: m for r_, n, w, m in rows if r_ == rnd and w == what}
                print("  round %d %-21s %6.1fx  %6.1fx" % (
                    rnd, what, got["base"]["cpu_us"] / max(got["current"]["cpu_us"], 1e-9),
                    got["base"]["cmd_us"] / max(got["current"]["cmd_us"], 1e-9)))
    finally:
        for s in svcs:
            s.stop()
        redis_proc.terminate()
        redis_proc.wait(15)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
