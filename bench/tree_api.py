"""tree_api: the calls scripts/bench-tree makes through the service (stdlib only, keep-alive
connections). Exits 1 (saying why) on any unexpected answer.

  tree_api.py setup BASE OWNER_AUTH OUT
      an entity with the skills Root > Branch > Leaf and a second root, Other; writes
      OUT/tree.env (EID, ROOT, BRANCH, LEAF, OTHER)
  tree_api.py seed BASE OWNER_AUTH EID LEAF N CONNS
      N fresh members force-added (1,000 a request) and each awarded one contribution with a
      score of 1-100 in LEAF (100 contributions a request), over CONNS connections at once;
      prints the largest score given
  tree_api.py move BASE OWNER_AUTH EID SKILL PARENT
      the skill moved under PARENT; prints the answer's time in ms
  tree_api.py board BASE AUTH EID BY
      the first page of the board by BY: prints "<rebuilding 0|1> <entries> <top value>"
  tree_api.py wait BASE AUTH EID BY1 BY2 OUT
      polls both boards every 0.2 s over one connection (one process: a poller started anew
      each time would take a share of the CPUs the GET load measures) until neither answers
      "rebuilding"; then writes the time (Unix seconds) to OUT
  tree_api.py poll BASE AUTH EID BY1 BY2 SECONDS
      polls both boards as wait does, for SECONDS whatever they answer: the same load beside
      the GET windows measured without a rebuild, so that they differ from those during it by
      the rebuild alone
"""
import json
import os
import random
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def die(msg):
    sys.stderr.write("tree_api: %s\n" % msg)
    os._exit(1)


class Api:
    def __init__(self, base):
        u = urllib.parse.urlsplit(base)
        self.conn = httpc.Conn(u.hostname, u.port, timeout=300.0)

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


def setup(base, auth, out):
    api = Api(base)
    eid = api.call("POST", "/api/entities?" + auth, {
        "name": "Tree %d" % os.getpid(), "description": "", "twitter": "", "discord": "",
        "website": "", "imageUrl": "", "public": True,
        "ownerAddresses": [auth.split("address=")[1].split("&")[0]]}, want=201)["data"]["id"]

    def skill(name, parent=None):
        body = {"entityID": eid, "name": name, "description": ""}
        if parent:
            body["parentId"] = parent
        return api.call("POST", "/api/skills?" + auth, body, want=201)["data"]["id"]
    root = skill("Root")
    branch = skill("Branch", root)
    leaf = skill("Leaf", branch)
    other = skill("Other")
    with open(os.path.join(out, "tree.env"), "w") as f:
        f.write("EID=%s\nROOT=%s\nBRANCH=%s\nLEAF=%s\nOTHER=%s\n" % (eid, root, branch, leaf,
                                                                       other))


def seed(base, auth, eid, leaf, n, conns):
    n, conns = int(n), int(conns)
    top = [0] * conns

    def work(k):
        api = Api(base)
        rnd = random.Random(k)
        lo, hi = n * k // conns, n * (k + 1) // conns
        for at in range(lo, hi, 1000):
            addrs = ["0x" + os.urandom(20).hex() for _ in range(min(1000, hi - at))]
            doc = api.call("POST", "/api/entities/%s/force-add?%s" % (eid, auth),
                           {"addresses": addrs, "Chain": "eth"})
            if doc.get("added") != len(addrs):
                die("force-add: %s" % doc)
            for i in range(0, len(addrs), 100):
                batch = []
                for a in addrs[i:i + 100]:
                    s = rnd.randint(1, 100)
                    top[k] = max(top[k], s)
                    batch.append({"member": a, "skills": [{"skillId": leaf, "score": s}],
                                  "title": "seed"})
                api.call("POST", "/api/entities/%s/contributions?%s" % (eid, auth),
                         {"contributions": batch}, want=201)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(max(top))


def move(base, auth, eid, skill, parent):
    api = Api(base)
    t0 = time.monotonic()
    api.call("POST", "/api/entities/%s/skills/%s/update?%s" % (eid, skill, auth),
             {"parentId": parent})
    print("%.1f" % ((time.monotonic() - t0) * 1000))


def board(base, auth, eid, by):
    doc = Api(base).call("GET", "/api/entities/%s/leaderboard?by=%s&limit=20&%s" % (eid, by,
                                                                                       auth))
    data = doc.get("data") or []
    print("%d %d %s" % (1 if doc.get("rebuilding") else 0, len(data),
                        data[0]["value"] if data else 0))


def poll(base, auth, eid, by1, by2, seconds):
    api = Api(base)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        for by in (by1, by2):
            api.call("GET", "/api/entities/%s/leaderboard?by=%s&limit=1&%s" % (eid, by, auth))
        time.sleep(0.2)


def wait(base, auth, eid, by1, by2, out):
    api = Api(base)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        busy = False
        for by in (by1, by2):
            doc = api.call("GET", "/api/entities/%s/leaderboard?by=%s&limit=1&%s" % (eid, by,
                                                                                      auth))
            busy = busy or bool(doc.get("rebuilding"))
        if not busy:
            with open(out, "w") as f:
                f.write("%.3f\n" % time.time())
            return
        time.sleep(0.2)
    die("the boards were still rebuilding after an hour")


def main():
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    fns = {"setup": (setup, 3), "seed": (seed, 6), "move": (move, 5), "board": (board, 4),
           "wait": (wait, 6), "poll": (poll, 6)}
    if cmd not in fns or len(args) != fns[cmd][1]:
        die(__doc__)
    fns[cmd][0](*args)


if __name__ == "__main__":
    main()
