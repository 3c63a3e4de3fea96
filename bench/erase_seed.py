"""erase_seed: makes one entity as large as a deleted entity may be, straight in Redis, fast.

For scripts/bench-erase. The entity (bench/seed.py's template, with its skills) must exist. In
the key shapes of service/redis/keys.h, as the scripts leave them:
  ent:{id}:members / :members:order   N member entries (as force_add.lua writes them)
  ent:{id}:contribs                   C contributions (Contribution JSON), to the first C members
  ent:{id}:contribs:of:<address>      each member's index of them
  ent:{id}:prog:<address>             "xp" and "s:<skill id>" of those members
  ent:{id}:lb:xp, :lb:s:<skill id>    their board entries
  ent:{id}:events                     one contribution.added event per contribution
  ent:{id}:idem:<key>                 K idempotency keys (client-chosen names)
Everything goes through one `redis-cli --pipe`. Prints one line: counts, seconds, DBSIZE.

  erase_seed.py --redis-port P --entity c-… --owner 0x… --members N --contributions C
                --idem K
"""
import argparse
import os
import random
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed import Redis, die, resp  # noqa: E402
from progress_seed import pipe  # noqa: E402

BATCH = 1000
NINES = 9999999999999999


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--entity", required=True)
    ap.add_argument("--owner", required=True)
    ap.add_argument("--members", type=int, default=1000000)
    ap.add_argument("--contributions", type=int, default=100000)
    ap.add_argument("--idem", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=27)
    a = ap.parse_args()
    n, c = a.members, min(a.contributions, a.members)
    r = Redis(a.redis_port)
    E = "ent:{%s}" % a.entity
    skills = sorted(x.decode() for x in r.call("HKEYS", E + ":skills"))
    if not skills:
        die("the entity %s has no skills" % a.entity)
    rnd = random.Random(a.seed)
    now_ms = int(time.time() * 1000)
    added = b"%016d" % now_ms
    tail = (":%s:eth" % a.owner).encode()
    addrs = ["0x%040x" % rnd.getrandbits(160) for _ in range(n)]
    t0 = time.monotonic()
    iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now_ms / 1000))

    def stream():
        mk, ok = (E + ":members").encode(), (E + ":members:order").encode()
        for i in range(0, n, BATCH):
            h, z = [], []
            for ad in addrs[i:i + BATCH]:
                entry = added + b":" + ad.encode() + tail
                h += [ad.encode(), entry]
                z += [b"0", entry]
            yield resp(b"HSET", mk, *h) + resp(b"ZADD", ok, *z)
        ck, ek, lbx = (E + ":contribs").encode(), (E + ":events").encode(), (E + ":lb:xp").encode()
        for i in range(0, c, BATCH):
            out, h = [], []
            for j in range(i, min(i + BATCH, c)):
                ad, sid = addrs[j], skills[j % len(skills)]
                cid = "k-" + str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                score = 1 + j % 50
                rec = ('{"id":"%s","entityID":"%s","member":"%s","skills":[{"skillId":"%s",'
                       '"score":%d}],"xp":%d,"title":"seeded","url":null,"createdAt":"%s",'
                       '"createdBy":"%s","revoked":false,"revokedAt":null,"revokedBy":null,'
                       '"reason":null}' % (cid, a.entity, ad, sid, score, score, iso, a.owner))
                h += [cid, rec]
                out.append(resp("ZADD", E + ":contribs:of:" + ad, "0",
                                "%016d:%s" % (now_ms, cid)))
                out.append(resp("HSET", E + ":prog:" + ad, "xp", str(score), "s:" + sid,
                                str(score)))
                lb = "%016d:%s" % (NINES - score, ad)
                out.append(resp(b"ZADD", lbx, b"0", lb))
                out.append(resp("ZADD", E + ":lb:s:" + sid, "0", lb))
                out.append(resp(b"XADD", ek, b"*", b"type", b"contribution.added", b"at", iso,
                                b"actor", a.owner, b"data",
                                '{"id":"%s","member":"%s","xp":%d}' % (cid, ad, score)))
            out.append(resp(b"HSET", ck, *h))
            yield b"".join(out)
        for i in range(0, a.idem, BATCH):
            yield b"".join(resp("SET", "%s:idem:key-%d" % (E, j), "%040x\n[]" % j, "EX", "86400")
                           for j in range(i, min(i + BATCH, a.idem)))

    summary = pipe(a.redis_port, stream())
    print("erase_seed members=%d contributions=%d idem=%d seconds=%.1f dbsize=%d (%s)" % (
        n, c, a.idem, time.monotonic() - t0, r.call("DBSIZE"), summary))


if __name__ == "__main__":
    main()
