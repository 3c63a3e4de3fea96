"""progress_api: the calls scripts/bench-progress makes through the service, one keep-alive
connection, stdlib only. Exits 1 (saying why) on any unexpected answer.

  progress_api.py check BASE ENTITY OWNER_AUTH READER_AUTH DIR
      the seeded state read back: DIR/expect.json's members' progress (xp, rank, every skill's
      score, the levels reached) and the XP board's first page of 20, against what
      bench/progress_seed.py computed; one deep page (DIR/lb-cursors.txt's first cursor) has
      20 entries in order
  progress_api.py force-add BASE ENTITY OWNER_AUTH N OUT
      N fresh members, force-added 100 a request; their addresses to OUT, one a line
  progress_api.py member BASE ENTITY OWNER_AUTH
      one fresh member, force-added, then awarded one contribution of score 1 in each of the
      entity's root skills (one request each, as the award benchmark does); prints its address
  progress_api.py chain BASE ENTITY OWNER_AUTH PARENT DEPTH
      DEPTH skills made through the API, the first under PARENT (a root skill), each next one
      under the one before; prints their ids, the deepest last, one a line
  progress_api.py xp BASE ENTITY OWNER_AUTH XP SCORE FILE
      one contribution to each member listed in FILE, 100 a request: XP xp, and SCORE in each
      of the entity's skills
"""
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def die(msg):
    sys.stderr.write("progress_api: %s\n" % msg)
    sys.exit(1)


class Api:
    def __init__(self, base):
        u = urllib.parse.urlsplit(base)
        self.conn = httpc.Conn(u.hostname, u.port)

    def call(self, method, path, body=None, want=200):
        data = json.dumps(body).encode() if body is not None else None
        st, _, out = self.conn.request(method, path, data)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        if st != want or not isinstance(doc, dict) or doc.get("success") is not True:
            die("%s %s: %d %s" % (method, path.split("?")[0], st, out[:300]))
        return doc


def check(base, eid, owner_auth, reader_auth, d):
    api = Api(base)
    with open(os.path.join(d, "expect.json")) as f:
        expect = json.load(f)
    for m in expect["members"]:
        got = api.call("GET", "/api/entities/%s/members/%s/progress?%s" %
                       (eid, m["member"], reader_auth))["data"]
        skills = {s["skillId"]: s["score"] for s in got["skills"]}
        reached = sorted(lv["id"] for lv in got["levels"] if lv["reached"])
        if got["xp"] != m["xp"] or got["rank"] != m["rank"] or skills != m["skills"] or \
                reached != m["reached"]:
            die("progress of %s: got xp %s rank %s skills %s reached %s, expected %s" %
                (m["member"], got["xp"], got["rank"], skills, reached, m))
    page = api.call("GET", "/api/entities/%s/leaderboard?limit=20&%s" % (eid, reader_auth))
    if page["data"] != expect["first_page"] or not page["nextCursor"]:
        die("first leaderboard page: got %s, expected %s" % (page["data"][:3],
                                                            expect["first_page"][:3]))
    with open(os.path.join(d, "lb-cursors.txt")) as f:
        cursor = f.readline().strip()
    deep = api.call("GET", "/api/entities/%s/leaderboard?limit=20&cursor=%s&%s" %
                    (eid, cursor, owner_auth))["data"]
    vals = [e["value"] for e in deep]
    if len(deep) != 20 or vals != sorted(vals, reverse=True) or deep[0]["rank"] < 20:
        die("deep leaderboard page: %s" % deep[:3])
    print("checked through the API: %d members' progress, the first page (top XP %d), a deep "
          "page from rank %d" % (len(expect["members"]), page["data"][0]["value"],
                                 deep[0]["rank"]))


def force_add(api, eid, owner_auth, addrs):
    for i in range(0, len(addrs), 100):
        doc = api.call("POST", "/api/entities/%s/force-add?%s" % (eid, owner_auth),
                       {"addresses": addrs[i:i + 100], "Chain": "eth"})
        if doc.get("added") != len(addrs[i:i + 100]):
            die("force-add: %s" % doc)


def main():
    if len(sys.argv) < 2:
        die(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "check" and len(args) == 5:
        check(*args)
    elif cmd == "force-add" and len(args) == 5:
        base, eid, auth, n, out = args
        addrs = ["0x" + os.urandom(20).hex() for _ in range(int(n))]
        force_add(Api(base), eid, auth, addrs)
        with open(out, "w") as f:
            f.write("\n".join(addrs) + "\n")
    elif cmd == "member" and len(args) == 3:
        base, eid, auth = args
        api = Api(base)
        addr = "0x" + os.urandom(20).hex()
        force_add(api, eid, auth, [addr])
        skills = api.call("GET", "/api/skills?entityID=%s&%s" % (eid, auth))["data"]["skills"]
        for i, s in enumerate(x for x in skills if x.get("parentId") is None):
            api.call("POST", "/api/entities/%s/contributions?%s" % (eid, auth),
                     {"member": addr, "skills": [{"skillId": s["id"], "score": 1}],
                      "title": "memory award %d" % i}, want=201)
        print(addr)
    elif cmd == "chain" and len(args) == 5:
        base, eid, auth, parent, depth = args
        api = Api(base)
        ids = []
        for i in range(int(depth)):
            doc = api.call("POST", "/api/skills?%s" % auth,
                           {"entityID": eid, "name": "bench depth %d" % (i + 1),
                            "description": "", "parentId": ids[-1] if ids else parent}, want=201)
            if doc["data"].get("depth") != i + 1:
                die("chain: skill %d made at depth %s" % (i + 1, doc["data"].get("depth")))
            ids.append(doc["data"]["id"])
        print("\n".join(ids))
    elif cmd == "xp" and len(args) == 6:
        base, eid, auth, xp, score, path = args
        api = Api(base)
        skills = api.call("GET", "/api/skills?entityID=%s&%s" % (eid, auth))["data"]["skills"]
        given = [{"skillId": s["id"], "score": int(score)} for s in skills[:32]]
        with open(path) as f:
            addrs = [line.strip() for line in f if line.strip()]
        for i in range(0, len(addrs), 100):
            api.call("POST", "/api/entities/%s/contributions?%s" % (eid, auth),
                     {"contributions": [{"member": a, "xp": int(xp), "skills": given,
                                         "title": "xp %d" % (i + j)}
                                        for j, a in enumerate(addrs[i:i + 100])]}, want=201)
    else:
        die(__doc__)


if __name__ == "__main__":
    main()
