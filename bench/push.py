#!/usr/bin/env python3
"""push.py: the API calls and the figures of scripts/bench-push (loopback only).

  push.py setup BASE AUTH OWNER SIG MEMBERS OUT_DIR
      an entity owned by OWNER, MEMBERS force-added members (OUT_DIR/members.txt), one skill,
      a session token; writes OUT_DIR/env (EID, SKILL, TOKEN) for the shell to source
  push.py hook BASE EID TOKEN URL [enabled]
      makes a webhook endpoint to URL; prints its id
  push.py enable BASE EID TOKEN WID true|false
  push.py events BASE EID TOKEN
      prints how many events the entity's log holds (walking GET /events)
  push.py award BASE EID TOKEN MEMBER SKILL N INTERVAL_MS
      N awards to MEMBER, one each INTERVAL_MS (events for the streams)
  push.py lag LOG EID [SINCE_S]
      from the receiver's log ("<arrival s.ms> <webhook-id> <status>"), the deliveries of EID
      arriving after SINCE_S: count, distinct, and the lag (arrival - the event id's ms) p50,
      p99, max, and the span first..last arrival
"""
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def die(msg):
    sys.stderr.write("push.py: %s\n" % msg)
    sys.exit(1)


class Api:
    def __init__(self, base, token=None):
        u = urllib.parse.urlsplit(base)
        self.conn = httpc.Conn(u.hostname, u.port)
        self.token = token

    def call(self, method, path, body=None, want=(200, 201)):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + self.token} if self.token else None
        st, _, out = self.conn.request(method, path, data, headers)
        if st not in want:
            die("%s %s answered %d: %s" % (method, path.split("?")[0], st, out[:300]))
        return json.loads(out)


def setup(base, auth, owner, sig, members, out_dir):
    api = Api(base)
    eid = api.call("POST", "/api/entities?" + auth, {
        "name": "Bench Push", "description": "push benchmark", "ownerAddresses": [owner],
        "twitter": "", "discord": "", "website": "", "imageUrl": "", "public": False})["data"]["id"]
    addrs = ["0x%040x" % (0xbe0c0000 + i) for i in range(int(members))]
    for i in range(0, len(addrs), 100):
        api.call("POST", "/api/entities/%s/force-add?%s" % (eid, auth),
                 {"addresses": addrs[i:i + 100], "Chain": "eth"})
    d = api.call("POST", "/api/skills?" + auth,
                 {"entityID": eid, "name": "Bench skill", "description": ""})["data"]
    skill = (d[0] if isinstance(d, list) else d)["id"]
    token = api.call("POST", "/api/auth/session", {"address": owner, "signature": sig})["data"]["token"]
    with open(os.path.join(out_dir, "members.txt"), "w") as f:
        f.write("\n".join(addrs) + "\n")
    with open(os.path.join(out_dir, "env"), "w") as f:
        f.write("EID=%s\nSKILL=%s\nTOKEN=%s\n" % (eid, skill, token))


def hook(base, eid, token, url, enabled="true"):
    api = Api(base, token)
    wid = api.call("POST", "/api/entities/%s/webhooks" % eid,
                   {"url": url, "events": [], "description": "bench"})["data"]["id"]
    if enabled != "true":
        enable(base, eid, token, wid, "false")
    print(wid)


def enable(base, eid, token, wid, on):
    Api(base, token).call("POST", "/api/entities/%s/webhooks/%s/update" % (eid, wid),
                          {"enabled": on == "true"})


def events(base, eid, token):
    api, n, after = Api(base, token), 0, ""
    for _ in range(100000):
        doc = api.call("GET", "/api/entities/%s/events?limit=1000%s" % (eid, after))
        n += len(doc["data"])
        if not doc.get("nextCursor"):
            break
        after = "&after=" + doc["nextCursor"]
    print(n)


def award(base, eid, token, member, skill, n, interval_ms):
    api = Api(base, token)
    for i in range(int(n)):
        t0 = time.time()
        api.call("POST", "/api/entities/%s/contributions" % eid,
                 {"member": member, "skills": [{"skillId": skill, "score": 1}],
                  "title": "stream bench %d %f" % (i, t0)})
        rest = int(interval_ms) / 1000.0 - (time.time() - t0)
        if rest > 0:
            time.sleep(rest)


def lag(log, eid, since="0"):
    lags, arrivals, ids = [], [], set()
    for line in open(log):
        parts = line.split()
        if len(parts) < 2 or not parts[1].startswith(eid + ":"):
            continue
        at = float(parts[0])
        if at < float(since):
            continue
        ev_ms = int(parts[1][len(eid) + 1:].split("-")[0])
        lags.append(at * 1000 - ev_ms)
        arrivals.append(at)
        ids.add(parts[1])
    if not lags:
        print("count 0 distinct 0 p50_ms - p99_ms - max_ms - span_s 0")
        return
    lags.sort()
    p = lambda q: lags[min(len(lags) - 1, int((len(lags) - 1) * q))]  # noqa: E731
    print("count %d distinct %d p50_ms %.1f p99_ms %.1f max_ms %.1f span_s %.3f" % (
        len(lags), len(ids), p(0.5), p(0.99), lags[-1], max(arrivals) - min(arrivals)))


if __name__ == "__main__":
    cmds = {"setup": setup, "hook": hook, "enable": enable, "events": events, "award": award,
            "lag": lag}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        die(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
