"""progress_seed: gives one entity N members with progression state, straight in Redis, fast.

For scripts/bench-progress. The entity (made through the service: bench/seed.py's template)
must already have its skills and levels. For each of N members, in the key shapes of
service/redis/keys.h, as the award script leaves them:
  ent:{id}:members / :members:order   the member entry "<addedAt ms, 16 digits>:<address>:
                                       <addedBy>:eth" (as force_add.lua writes it)
  ent:{id}:prog:<address>             "xp", "s:<skill id>" for every skill, "r:<level id>" for
                                       every level the scores reach (as contrib_award.lua would)
  ent:{id}:lb:xp, :lb:s:<skill id>    "<9999999999999999 - value, 16 digits>:<address>" at score 0
Scores are 1..100 per skill (low scores likelier, many ties), XP is their sum (an award's default).
Addresses and scores come from a seeded PRNG. Everything goes through one `redis-cli --pipe`.

  progress_seed.py --redis-port P --entity c-… --owner 0x… --members N --out DIR
                   [--seed S] [--samples K] [--cursors K]

Then, from Redis: DIR/progress-members.txt (K sampled addresses), DIR/lb-cursors.txt (K cursors,
the board entry at a random rank between N/4 and 3N/4 as a nextCursor gives it, its 16 digits
and its address's hex: what a client paging that deep would send), and DIR/expect.json (a few members' expected progress and the
first page of the XP board, computed here, for the caller to check through the API). Prints one
line of timings and Redis used_memory before and after each part (members, then progression).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis, die, resp  # noqa: E402

BATCH = 1000  # entries per ZADD / HSET of the big keys


def used_memory(r):
    for line in r.call("INFO", "memory").decode().splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0


def pipe(port, chunks):
    """Pipes the RESP byte strings of the iterable into redis-cli --pipe; returns its summary."""
    p = subprocess.Popen(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for c in chunks:
            p.stdin.write(c)
        p.stdin.close()
        out = p.stdout.read().decode(errors="replace")
        rc = p.wait(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    last = [line for line in out.splitlines() if "errors" in line]
    if rc != 0 or not last or not last[-1].startswith("errors: 0,"):
        die("redis-cli --pipe: rc=%d %s" % (rc, out.strip()[-500:]))
    return last[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--entity", required=True)
    ap.add_argument("--owner", required=True)
    ap.add_argument("--members", type=int, default=1000000)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--cursors", type=int, default=1000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    n = a.members
    if n < 4:
        die("need --members >= 4")

    r = Redis(a.redis_port)
    E = "ent:{%s}" % a.entity
    skill_ids = sorted(x.decode() for x in r.call("HKEYS", E + ":skills"))
    levels = [json.loads(x) for x in r.call("HVALS", E + ":levels")]
    if not skill_ids:
        die("the entity %s has no skills" % a.entity)
    sidx = {s: i for i, s in enumerate(skill_ids)}
    lv_rules = [(lv["id"], lv["XP"], [(sidx[s], sc) for s, sc in zip(lv["skillIds"], lv["scores"])])
                for lv in levels]
    ns = len(skill_ids)
    rnd = random.Random(a.seed)
    now_ms = int(time.time() * 1000)
    added = b"%016d" % now_ms
    tail = (":%s:eth" % a.owner).encode()
    t0 = time.monotonic()

    addrs = sorted("0x%040x" % rnd.getrandbits(160) for _ in range(n))
    addr_b = [x.encode() for x in addrs]
    if len(set(addrs)) != n:
        die("address collision; another --seed")

    # Part 1: the member entries.
    def members():
        mk, ok = (E + ":members").encode(), (E + ":members:order").encode()
        for i in range(0, n, BATCH):
            h, z = [], []
            for ad in addrs[i:i + BATCH]:
                b = ad.encode()
                entry = added + b":" + b + tail
                h += [b, entry]
                z += [b"0", entry]
            yield resp(b"HSET", mk, *h) + resp(b"ZADD", ok, *z)

    m0 = used_memory(r)
    pipe_members = pipe(a.redis_port, members())
    m1 = used_memory(r)
    t1 = time.monotonic()

    # Part 2: progression. scores[i] = the member's scores (a bytes of ns values 1..100).
    rmod = bytes((b * b) // 656 + 1 for b in range(256))  # 1..100, low likelier
    scores = [rnd.randbytes(ns).translate(rmod) for _ in range(n)]
    xp_of = [sum(s) for s in scores]
    reach_ms = str(now_ms).encode()
    skill_fields = [("s:" + s).encode() for s in skill_ids]
    lvl_fields = [(("r:" + lid).encode(), lxp, rules) for lid, lxp, rules in lv_rules]
    lb_keys = [(E + ":lb:xp").encode()] + [(E + ":lb:s:" + s).encode() for s in skill_ids]
    prog_prefix = E + ":prog:"
    NINES = 9999999999999999

    def progression():
        # The prog hashes, then each board in its own order (highest value first, ties by
        # address: addrs is sorted and the sort stable), which Redis inserts about three times
        # faster than in random order (the skiplist's search path stays in cache).
        for i in range(0, n, BATCH):
            out = []
            for j in range(i, min(i + BATCH, n)):
                ad, sc, xp = addrs[j], scores[j], xp_of[j]
                args = [b"HSET", (prog_prefix + ad).encode(), b"xp", b"%d" % xp]
                for k in range(ns):
                    args += [skill_fields[k], b"%d" % sc[k]]
                for field, lxp, rules in lvl_fields:
                    if xp >= lxp and all(sc[k] >= need for k, need in rules):
                        args += [field, reach_ms]
                out.append(resp(*args))
            yield b"".join(out)
        for bi, key in enumerate(lb_keys):
            vals = xp_of if bi == 0 else [s[bi - 1] for s in scores]
            order = sorted(range(n), key=vals.__getitem__, reverse=True)
            for i in range(0, n, BATCH):
                z = []
                for j in order[i:i + BATCH]:
                    z += [b"0", b"%016d:%s" % (NINES - vals[j], addr_b[j])]
                yield resp(b"ZADD", key, *z)

    pipe_prog = pipe(a.redis_port, progression())
    m2 = used_memory(r)
    t2 = time.monotonic()

    # Samples for the progress reads, cursors for the deep leaderboard pages (by rank, from
    # Redis: all scores 0, so rank order is the lexicographic order the board is read in).
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "progress-members.txt"), "w") as f:
        f.write("\n".join(rnd.sample(addrs, min(a.samples, n))) + "\n")
    cursors = []
    for _ in range(a.cursors):
        rank = rnd.randrange(n // 4, 3 * n // 4)
        e = r.call("ZRANGE", E + ":lb:xp", str(rank), str(rank))
        cursors.append((e[0][:16] + e[0][19:]).decode())
    with open(os.path.join(a.out, "lb-cursors.txt"), "w") as f:
        f.write("\n".join(cursors) + "\n")

    # Expected answers: competition rank by XP (1 + members with more XP), the XP board's first
    # page (highest XP, ties by address).
    count = {}
    for xp in xp_of:
        count[xp] = count.get(xp, 0) + 1
    above, rank_of = 0, {}
    for xp in sorted(count, reverse=True):
        rank_of[xp] = above + 1
        above += count[xp]
    order = sorted(range(n), key=xp_of.__getitem__, reverse=True)[:20]
    checks = [rnd.randrange(n) for _ in range(5)]
    expect = {
        "members": [{"member": addrs[i], "xp": xp_of[i], "rank": rank_of[xp_of[i]],
                     "skills": {skill_ids[k]: scores[i][k] for k in range(ns)},
                     "reached": sorted(lid for lid, lxp, rules in lv_rules
                                       if xp_of[i] >= lxp and
                                       all(scores[i][k] >= need for k, need in rules))}
                    for i in checks],
        "first_page": [{"rank": rank_of[xp_of[i]], "member": addrs[i], "value": xp_of[i]}
                       for i in order],
    }
    with open(os.path.join(a.out, "expect.json"), "w") as f:
        json.dump(expect, f)
    print("progress_seed members=%d skills=%d levels=%d members_s=%.1f progression_s=%.1f "
          "used_memory=%d,%d,%d members_bytes_per=%.0f progression_bytes_per=%.0f dbsize=%d" %
          (n, ns, len(levels), t1 - t0, t2 - t1, m0, m1, m2, (m1 - m0) / n, (m2 - m1) / n,
           r.call("DBSIZE")))
    print("redis-cli: members %s; progression %s" % (pipe_members, pipe_prog))


if __name__ == "__main__":
    main()
