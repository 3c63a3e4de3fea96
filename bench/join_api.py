"""join_api: the calls scripts/bench-join makes through the service (stdlib only, keep-alive
connections). Exits 1 (saying why) on any unexpected answer.

  join_api.py setup BASE OWNER_AUTH OUT
      entities A and B, A's rule {"role": B's members} (no chain read at a join); writes
      OUT/join.env (A, B)
  join_api.py seed BASE OWNER_AUTH A B AUTHS CONNS
      every wallet of the AUTHS file (entityd-sign lines) force-added to B (1,000 a request),
      then each joins A itself (POST /join, signed by it), over CONNS connections at once
  join_api.py rule BASE OWNER_AUTH A CHAIN_ID
      A's rule set to a 3-leaf rule on CHAIN_ID (all of: an ERC-20 balance of at least 1, any
      ERC-721 token, a native balance of at least 1): the rules members keep their place in
      the re-check
  join_api.py members BASE OWNER_AUTH A
      prints A's member count (the users list, 1,000 a page)
"""
import json
import os
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402

TOKEN = "0x" + "11" * 20
NFT = "0x" + "22" * 20


def die(msg):
    sys.stderr.write("join_api: %s\n" % msg)
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


def address_of(auth):
    return auth.split("address=")[1].split("&")[0]


def setup(base, auth, out):
    api = Api(base)

    def entity(name):
        return api.call("POST", "/api/entities?" + auth, {
            "name": "%s %d" % (name, os.getpid()), "description": "", "twitter": "",
            "discord": "", "website": "", "imageUrl": "", "public": True,
            "ownerAddresses": [address_of(auth)]}, want=201)["data"]["id"]
    b = entity("Holders")
    a = entity("Gated")
    api.call("POST", "/api/entities/%s/join-rules?%s" % (a, auth),
             {"rule": {"role": {"entityID": b, "role": "member"}}})
    with open(os.path.join(out, "join.env"), "w") as f:
        f.write("A=%s\nB=%s\n" % (a, b))


def seed(base, auth, a, b, auths, conns):
    with open(auths) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    api = Api(base)
    addrs = [address_of(ln) for ln in lines]
    for i in range(0, len(addrs), 1000):
        api.call("POST", "/api/entities/%s/force-add?%s" % (b, auth),
                 {"addresses": addrs[i:i + 1000], "Chain": "eth"})
    conns = max(1, int(conns))

    def work(k):
        c = Api(base)
        for ln in lines[k::conns]:
            c.call("POST", "/api/entities/%s/join?%s" % (a, ln), {})
    threads = [threading.Thread(target=work, args=(k,)) for k in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rule(base, auth, a, chain):
    chain = int(chain)
    Api(base).call("POST", "/api/entities/%s/join-rules?%s" % (a, auth), {"rule": {"all": [
        {"erc20": {"chainId": chain, "contract": TOKEN, "min": "1"}},
        {"erc721": {"chainId": chain, "contract": NFT}},
        {"native": {"chainId": chain, "min": "1"}}]}})


def unrule(base, auth, a):
    """Deletes A's rule: self-joining ends and the members are no longer re-checked."""
    Api(base).call("DELETE", "/api/entities/%s/join-rules?%s" % (a, auth))


def members(base, auth, a):
    api, n, cursor = Api(base), 0, None
    for _ in range(100000):
        path = "/api/entities/%s/users?limit=1000&%s" % (a, auth)
        if cursor:
            path += "&cursor=" + urllib.parse.quote(cursor)
        doc = api.call("GET", path)
        n += len(doc["users"])
        cursor = doc.get("nextCursor")
        if not cursor:
            break
    print(n)


def main(argv):
    cmds = {"setup": (setup, 3), "seed": (seed, 6), "rule": (rule, 4), "unrule": (unrule, 3), "members": (members, 3)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        die("usage: see the module's text")
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
