"""seed: fills a private Redis with entities for the benchmarks, fast.

One template entity is made through the service itself (create, skills, levels, one force-add),
so every key shape and record format is the service's own. Its keys are then read back from
Redis and cloned with fresh ids (entity id, skill ids; ids keep their length, so the RESP
stream is built once and only the ids are swapped) into a RESP protocol stream piped to
`redis-cli --pipe`. The template gets MEMBERS members in all (its one force-added member's
keys, address swapped); clones get no members.

  seed.py --base http://127.0.0.1:PORT --redis-port RPORT --sign ENTITYD_SIGN_BIN
          --entities N --skills S --levels L --members M --out DIR

The owner signs with the key in ENTITYD_SIGN_KEY (entityd-sign's default). Writes DIR/entities.txt:
the template (the entity with the members) first, then the clones. Exits 1 when a check fails.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def die(msg):
    sys.stderr.write("seed: %s\n" % msg)
    sys.exit(1)


# ---- RESP ----------------------------------------------------------------------------------

def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.sock.makefile("rb")

    def _read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError("redis: unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self._read()

    def commandstats(self):
        """{command: (usec_per_call, calls)} from INFO commandstats."""
        out = {}
        for line in self.call("INFO", "commandstats").decode().splitlines():
            if line.startswith("cmdstat_"):
                name, rest = line[len("cmdstat_"):].split(":", 1)
                f = dict(kv.split("=") for kv in rest.split(","))
                out[name] = (float(f["usec_per_call"]), int(f["calls"]))
        return out


# ---- ids -----------------------------------------------------------------------------------

def uuids(n):
    """n random lowercase UUIDv4 strings."""
    raw = os.urandom(16 * n).hex()
    out = []
    for i in range(0, 32 * n, 32):
        h = raw[i:i + 32]
        out.append("%s-%s-4%s-%s%s-%s" % (h[:8], h[8:12], h[13:16], "89ab"[int(h[16], 16) & 3],
                                         h[17:20], h[20:32]))
    return out


# ---- through the service -------------------------------------------------------------------

def sign(sign_bin, base, extra=()):
    r = subprocess.run([sign_bin, "--url", base, *extra], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        die("entityd-sign failed: " + r.stderr.strip())
    return r.stdout.split()


def api(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    status, _, out = conn.request(method, path, data)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    return status, doc


def make_template(conn, auth, owner, nskills, nlevels, with_member):
    st, doc = api(conn, "POST", "/api/entities?" + auth, {
        "name": "Benchmark Guild",
        "description": "A guild of builders seeded for the entityd benchmarks; every clone has "
                       "the same fields and a fresh id.",
        "ownerAddresses": [owner],
        "twitter": "@benchguild", "discord": "benchguild", "website": "https://bench.example",
        "imageUrl": "https://bench.example/logo.png", "telegram": "benchguild",
        "bannerUrl": "https://bench.example/banner.png",
    })
    if st != 201:
        die("create entity: %d %s" % (st, doc))
    eid = doc["data"]["id"]
    skill_ids = []
    if nskills:
        names = ["Skill %02d" % i for i in range(nskills)]
        st, doc = api(conn, "POST", "/api/skills/multiple?" + auth, {
            "entityID": eid, "names": names,
            "descriptions": ["What skill %02d is about, in a sentence." % i
                             for i in range(nskills)]})
        if st != 201:
            die("add skills: %d %s" % (st, doc))
        skill_ids = [s["id"] for s in doc["data"]]
    for j in range(nlevels):
        sk = [skill_ids[(2 * j + k) % len(skill_ids)] for k in range(min(2, len(skill_ids)))]
        body = {"name": "Level %d" % (j + 1), "description": "Reach level %d." % (j + 1),
                "skillIds": sk, "scores": [10 * (j + 1)] * len(sk), "XP": 100 * (j + 1) ** 2}
        if j == nlevels - 1:
            body["endsAt"] = "2030-01-01T00:00:00.000Z"
        st, doc = api(conn, "POST", "/api/entities/%s/levels/lv-%d/update?%s" % (eid, j + 1, auth),
                      body)
        if st not in (200, 201):
            die("level upsert: %d %s" % (st, doc))
    if with_member:
        st, doc = api(conn, "POST", "/api/entities/%s/force-add?%s" % (eid, auth),
                      {"addresses": ["0x" + os.urandom(20).hex()], "Chain": "eth"})
        if st != 200:
            die("force-add: %d %s" % (st, doc))
    return eid, skill_ids


# ---- cloning -------------------------------------------------------------------------------

def dump_keys(r, eid):
    """{key: (type, contents)} for every key naming the entity, but its event stream (the
    template's own history: clones start without one, which no read the benchmarks make
    looks at)."""
    keys, cursor = [], b"0"
    for _ in range(10000):
        cursor, batch = r.call("SCAN", cursor, "MATCH", "*{%s}*" % eid, "COUNT", "1000")
        keys += batch
        if cursor == b"0":
            break
    out = {}
    for k in keys:
        t = r.call("TYPE", k)
        if t == b"hash":
            out[k] = (t, r.call("HGETALL", k))
        elif t == b"set":
            out[k] = (t, sorted(r.call("SMEMBERS", k)))
        elif t == b"zset":
            out[k] = (t, r.call("ZRANGE", k, "0", "-1", "WITHSCORES"))
        elif t == b"string":
            out[k] = (t, r.call("GET", k))
        elif t == b"stream":
            continue
        else:
            die("unexpected key type %r for %r" % (t, k))
    return out


def commands_for(key, kind, contents):
    if kind == b"hash":
        return [resp("HSET", key, *contents)] if contents else []
    if kind == b"set":
        return [resp("SADD", key, *contents)] if contents else []
    if kind == b"zset":
        args = []
        for i in range(0, len(contents), 2):
            args += [contents[i + 1], contents[i]]
        return [resp("ZADD", key, *args)] if args else []
    return [resp("SET", key, contents)]


def split_template(blob, tokens):
    """blob as a list of byte strings and token indexes (ints), for fast id swapping."""
    parts, pos = [], 0
    while True:
        best = None
        for ti, tok in enumerate(tokens):
            j = blob.find(tok, pos)
            if j >= 0 and (best is None or j < best[0]):
                best = (j, ti)
        if best is None:
            parts.append(blob[pos:])
            return parts
        j, ti = best
        parts.append(blob[pos:j])
        parts.append(ti)
        pos = j + len(tokens[ti])


def is_member_key(k):
    return b"}:members" in k


def member_stream(dump, total):
    """RESP for total-1 more members of the template: its one member's keys with the address
    swapped (whatever the record format; all keep the template member's addedAt, so pages go
    in address order)."""
    mkeys = {k: v for k, v in dump.items() if is_member_key(k)}
    hashes = [v for t, v in mkeys.values() if t == b"hash"]
    if not hashes or len(hashes[0]) != 2:
        die("the template should hold exactly one member in a ...:members hash")
    addr = hashes[0][0]
    blob = b"".join(c for k, (t, v) in sorted(mkeys.items()) for c in commands_for(k, t, v))
    if addr not in blob:
        die("unexpected member keys: %r" % blob[:300])
    parts = split_template(blob, [addr])
    out = []
    for _ in range(total - 1):
        sub = [b"0x" + os.urandom(20).hex().encode()]
        out.append(b"".join(p if p.__class__ is bytes else sub[p] for p in parts))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-cli", default="redis-cli")
    ap.add_argument("--sign", required=True)
    ap.add_argument("--entities", type=int, default=100000)
    ap.add_argument("--skills", type=int, default=10)
    ap.add_argument("--levels", type=int, default=5)
    ap.add_argument("--members", type=int, default=10000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.entities < 1 or a.levels and not a.skills:
        die("need --entities >= 1, and skills for levels")

    t0 = time.monotonic()
    auth = sign(a.sign, a.base)[0]
    owner = auth.split("&")[0].split("=")[1]
    host, port = a.base.split("//")[1].split(":")
    conn = httpc.Conn(host, int(port))
    eid, skill_ids = make_template(conn, auth, owner, a.skills, a.levels, a.members > 0)
    r = Redis(a.redis_port)
    dump = dump_keys(r, eid)
    if not dump:
        die("no Redis keys name the template entity %s: is the service on this Redis?" % eid)

    # Clones: every key but the members ones, ids swapped.
    blob = b"".join(c for k, (t, v) in sorted(dump.items()) if not is_member_key(k)
                    for c in commands_for(k, t, v))
    tokens = [eid.encode()] + [s.encode() for s in skill_ids]
    parts = split_template(blob, tokens)
    nclones = a.entities - 1
    os.makedirs(a.out, exist_ok=True)
    ids = [eid]
    t1 = time.monotonic()
    pipe = subprocess.Popen([a.redis_cli, "-h", "127.0.0.1", "-p", str(a.redis_port), "--pipe"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        if a.members > 1:
            pipe.stdin.write(b"".join(member_stream(dump, a.members)))
        chunk = []
        done = 0
        while done < nclones:
            n = min(2000, nclones - done)
            eids = uuids(n)
            sids = uuids(n * len(skill_ids))
            for i in range(n):
                sub = [("c-" + eids[i]).encode()] + [
                    ("s-" + s).encode() for s in sids[i * len(skill_ids):(i + 1) * len(skill_ids)]]
                chunk.append(b"".join(p if p.__class__ is bytes else sub[p] for p in parts))
            ids += ["c-" + e for e in eids]
            pipe.stdin.write(b"".join(chunk))
            chunk = []
            done += n
        pipe.stdin.close()
        out = pipe.stdout.read().decode(errors="replace")
        rc = pipe.wait(timeout=600)
    finally:
        if pipe.poll() is None:
            pipe.kill()
            pipe.wait()
    t2 = time.monotonic()
    last = [l for l in out.splitlines() if "errors" in l]
    if rc != 0 or not last or not last[-1].startswith("errors: 0,"):
        die("redis-cli --pipe: rc=%d %s" % (rc, out.strip()))
    with open(os.path.join(a.out, "entities.txt"), "w") as f:
        f.write("\n".join(ids) + "\n")

    # Verify through the service: clones read back whole, the template's member pages.
    checks = [ids[0], ids[-1]] + [ids[len(ids) * k // 7] for k in range(1, 7)]
    for cid in checks:
        st, doc = api(conn, "GET", "/api/entities/%s?address=%s" % (cid, owner))
        if st != 200 or doc["data"]["id"] != cid:
            die("verify entity %s: %d %s" % (cid, st, doc))
        st, doc = api(conn, "GET", "/api/skills?entityID=%s&%s" % (cid, auth))
        if st != 200 or len(doc["data"]["skills"]) != a.skills or \
                len(doc["data"]["levels"]) != a.levels or \
                any(s["entityID"] != cid for s in doc["data"]["skills"]):
            die("verify skills of %s: %d %s" % (cid, st, doc))
    if a.members:
        st, doc = api(conn, "GET", "/api/entities/%s/users?%s&limit=100" % (ids[0], auth))
        if st != 200 or len(doc["users"]) != min(100, a.members) or \
                (a.members > 100) != (doc.get("nextCursor") is not None):
            die("verify users of %s: %d %s" % (ids[0], st, str(doc)[:300]))
    dbsize = r.call("DBSIZE")
    conn.close()
    print("seeded entities=%d (skills=%d levels=%d each) members=%d keys=%d template=%.2fs "
          "pipe=%.2fs total=%.2fs verify=ok" % (a.entities, a.skills, a.levels, a.members, dbsize,
                                               t1 - t0, t2 - t1, time.monotonic() - t0))
    print("redis-cli: " + last[-1])


if __name__ == "__main__":
    main()
