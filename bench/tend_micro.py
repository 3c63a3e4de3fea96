"""tend_micro: Redis CPU per call of the removal script against the force-add script, on one
entity of N members each on 11 boards (XP and 10 skills), straight in Redis, no HTTP.

For issue 27's removal target (removal's Redis CPU in the request at most 2x force-add's): it
seeds the entity (members hash and order, 11 boards of N entries, the prog hashes of the members
it removes), loads the service's scripts as the service does (service/redis/lua, the prelude
prepended), and runs, each after CONFIG RESETSTAT and read back from INFO commandstats
(usec_per_call of EVALSHA, robust to a loaded machine's scheduling):
  fa      force_add.lua, one fresh address a call
  rm      members_remove.lua, one member a call: its XP entry tombstoned, the member added to
          the unswept set (sweeper idle)
  rm+big  the same with BIG removed members already waiting for the sweep (the XP board's
          gone zset and the unswept set big)
  sweep   sweep_step.lua until nothing is left, per member swept (11 entries)
  old     an earlier removal (a members_remove.lua from before the groups, given by --old:
          its arguments caller, platform, mode, version, events_max, now, address)
  groups  with --groups G,G,...: K removals of one member each, G to a group (one call, as
          the service groups the removals of one loop turn, redis/group.h), right after
          rm+big and before its sweep (the backlog grows by K a run)
  compare with --compare FILE,FILE,...: K removals of one member each, 20 to a group, by the
          service's members_remove.lua and by each FILE (another version of it, taking the
          same arguments) in turn, three rounds, right after the groups (the backlog grows by
          K a run, so neighbours in the list ran at nearly the same backlog)
Calls are pipelined 64 deep. Prints one line per workload; after rm+big, the commands the
removal ran inside its script, each with its own time (INFO commandstats): the rest of the
EVALSHA's time is Lua and the passing of arguments and replies.

  tend_micro.py --redis-port P [--members N] [--calls K] [--big B] [--old FILE] [--groups G,...]
                [--compare FILE,...]
"""
import argparse
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis, resp  # noqa: E402

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "redis", "lua")
E = "ent:{c-00000000-0000-4000-8000-000000000001}"
OWNER = "0x" + "11" * 20
SKILLS = ["s-00000000-0000-4000-8000-%012d" % i for i in range(10)]


def script(name, path=None):
    with open(os.path.join(LUA, "_prelude.lua")) as f:
        prelude = f.read()
    with open(path or os.path.join(LUA, name + ".lua")) as f:
        body = f.read()
    return body if body.startswith("-- standalone") else prelude + body


def inv(v):
    return "%016d" % (9999999999999999 - v)


def pipe(port, cmds):
    p = subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=b"".join(cmds),
                       capture_output=True)
    if p.returncode != 0:
        sys.exit("redis-cli --pipe: %s" % p.stderr.decode())


def evalsha_us(r):
    return r.commandstats().get("evalsha", (0.0, 0))


def run(r, port, sha, calls):
    """calls: [(keys, args)], pipelined 64 deep through one connection."""
    r.call("CONFIG", "RESETSTAT")
    for i in range(0, len(calls), 64):
        batch = calls[i:i + 64]
        r.sock.sendall(b"".join(resp("EVALSHA", sha, str(len(k)), *k, *a) for k, a in batch))
        for _ in batch:
            try:
                r._read()
            except RuntimeError as e:
                sys.exit(str(e))
    return evalsha_us(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--members", type=int, default=1000000)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--big", type=int, default=20000)
    ap.add_argument("--old")
    ap.add_argument("--groups", default="")
    ap.add_argument("--compare", default="")
    o = ap.parse_args()
    groups = [int(g) for g in o.groups.split(",") if g]
    compare = [f for f in o.compare.split(",") if f]
    port, n = o.redis_port, o.members
    rnd = random.Random(27)
    r = Redis(port)
    addrs = ["0x%040x" % rnd.getrandbits(160) for _ in range(n)]
    gone_n = 3 * o.calls + o.big + (o.calls if o.old else 0) + len(groups) * o.calls + \
        3 * (1 + len(compare)) * o.calls
    cmds = [resp("HSET", E, "id", E[5:-1], "isEnabled", "1", "public", "1"),
            resp("SADD", E + ":owners", OWNER)]
    cmds.append(resp("HSET", E + ":skills", *[x for s in SKILLS for x in (s, "{}")]))
    vals = {}
    for i in range(0, n, 1000):
        chunk = addrs[i:i + 1000]
        entries = ["%016d:%s:%s:eth" % (1700000000000 + i + j, a, OWNER)
                   for j, a in enumerate(chunk)]
        cmds.append(resp("HSET", E + ":members", *[x for a, e in zip(chunk, entries)
                                                     for x in (a, e)]))
        cmds.append(resp("ZADD", E + ":members:order", *[x for e in entries for x in ("0", e)]))
        for b in range(11):
            key = E + (":lb:xp" if b == 0 else ":lb:s:" + SKILLS[b - 1])
            vs = [rnd.randint(1, 1000 if b else 10000) for _ in chunk]
            cmds.append(resp("ZADD", key, *[x for a, v in zip(chunk, vs)
                                             for x in ("0", inv(v) + ":" + a)]))
            if i + 1000 <= gone_n + 1000:
                for a, v in zip(chunk, vs):
                    vals.setdefault(a, {})["xp" if b == 0 else "s:" + SKILLS[b - 1]] = v
    for a in addrs[:gone_n]:
        cmds.append(resp("HSET", E + ":prog:" + a, *[x for f, v in vals[a].items()
                                                       for x in (f, str(v))]))
    pipe(port, cmds)
    sha = {k: r.call("SCRIPT", "LOAD", script(k)).decode()
           for k in ("members_remove", "force_add", "sweep_step")}
    if o.old:
        sha["old"] = r.call("SCRIPT", "LOAD", script("members_remove", o.old)).decode()
    for f in compare:
        sha[f] = r.call("SCRIPT", "LOAD", script("members_remove", f)).decode()
    keys5 = [E, E + ":owners", E + ":admins", E + ":members", E + ":members:order"]
    shared = ["100000", "2026-01-01T00:00:00.000Z"]

    def one(a):
        """One removal's own part of a group's arguments: key count, argument count, then
        caller, platform, mode, version, address."""
        return ["0", "5", OWNER, "0", "remove", "v1", a]

    def removals(batch, per_call=1):
        """Removals of one member each, per_call of them in a group (one call)."""
        return [(keys5 + [E + ":lb:xp"], shared + [str(len(batch[i:i + per_call]))] +
                 [x for a in batch[i:i + per_call] for x in one(a)])
                for i in range(0, len(batch), per_call)]

    def sweep_all():
        """Steps of 176 entries until done: members swept, Redis µs per member (11 entries)."""
        r.call("CONFIG", "RESETSTAT")
        swept = 0
        for _ in range(1000000):
            out = r.call("EVALSHA", sha["sweep_step"], "3", E, E + ":sweep", E + ":members", "176")
            swept += out[1]
            if out[0] != b"MORE":
                break
        us, calls = evalsha_us(r)
        return swept // 11, us * calls / max(swept / 11, 1)

    at = 0
    fresh = ["0x%040x" % rnd.getrandbits(160) for _ in range(o.calls)]
    fa, _ = run(r, port, sha["force_add"],
                [(keys5, [OWNER, "0", "eth", "%016d" % 1800000000000, "v1", "100000",
                          "2026-01-01T00:00:00.000Z", str(10 * n), a]) for a in fresh])
    rm, _ = run(r, port, sha["members_remove"], removals(addrs[at:at + o.calls]))
    at += o.calls
    swept, sw = sweep_all()
    # the sweeper keeping up: a step after every 16 removals, the gone zsets small
    us = []
    for i in range(0, o.calls, 16):
        us.append(run(r, port, sha["members_remove"], removals(addrs[at + i:at + i + 16]))[0])
        r.call("EVALSHA", sha["sweep_step"], "3", E, E + ":sweep", E + ":members", "176")
    at += o.calls
    rms = sum(us) / len(us)
    print("removal with the sweeper keeping up: %.1f µs (%.2fx force-add)" % (rms, rms / fa))
    print("members %d, boards of %d entries; force-add %.1f µs per call; removal %.1f µs "
          "(%.2fx force-add), sweep %.1f µs per member swept (%d)" % (
              n, int(r.call("ZCARD", E + ":lb:xp")), fa, rm, rm / fa, sw, swept))
    # a big backlog first: the gone zsets hold o.big entries each
    run(r, port, sha["members_remove"], removals(addrs[at:at + o.big]))
    at += o.big
    rmb, _ = run(r, port, sha["members_remove"], removals(addrs[at:at + o.calls]))
    at += o.calls
    inside = sorted((us * calls / o.calls, name) for name, (us, calls) in
                    r.commandstats().items() if name != "evalsha" and calls >= o.calls)
    print("  inside a removal (µs a call): " + ", ".join(
        "%s %.1f" % (name, us) for us, name in reversed(inside)) +
        "; the rest of the %.1f µs is Lua and argument passing" % (rmb - sum(
            us for us, _ in inside)))
    for g in groups:
        batch = addrs[at:at + o.calls]
        at += o.calls
        us, _ = run(r, port, sha["members_remove"], removals(batch, g))
        print("removals of one member, %d a group: %.1f µs a call, %.1f µs a member (%.2fx one "
              "alone, with %d waiting)" % (g, us, us / g, us / g / rmb, at - 2 * o.calls))
    for rnd_ in range(3 if compare else 0):
        for name in ["members_remove"] + compare:
            batch = addrs[at:at + o.calls]
            at += o.calls
            us, _ = run(r, port, sha[name], removals(batch, 20))
            print("round %d, %s: %.1f µs a member, 20 a group (%d waiting)" % (
                rnd_ + 1, "this members_remove.lua" if name == "members_remove" else name,
                us / 20, at - 2 * o.calls))
    swept, sw = sweep_all()
    print("with %d removed members waiting for the sweep: removal %.1f µs (%.2fx force-add); "
          "sweep %.1f µs per member swept (%d)" % (o.big, rmb, rmb / fa, sw, swept))
    if o.old:
        # the arguments as members_remove.lua took them before removals were grouped
        old, _ = run(r, port, sha["old"], [
            (keys5 + [E + ":lb:xp"], [OWNER, "0", "remove", "v1"] + shared + [a])
            for a in addrs[at:at + o.calls]])
        print("earlier removal (11 ZREMs on the boards): %.1f µs (%.2fx force-add)" % (
            old, old / fa))


if __name__ == "__main__":
    main()
