"""erase_watch: the delete of scripts/bench-erase and the watch of its erasure, from one process
with one Redis connection (a redis-cli per poll would itself load the machine it measures).

  erase_watch.py delete --base http://127.0.0.1:PORT --path '/api/entities/c-…?address=…'
                 --redis-port P --entity c-… --redis-pid PID --out DIR [--after SECONDS]
      sleeps --after seconds, resets SLOWLOG, sends the DELETE on a fresh connection, then polls
      Redis every 20 ms until the erasure record and every erasures entry are gone. Writes
      DIR/delete.txt "<status> <ms>", DIR/delete-body.json, DIR/erase-seconds.txt and
      DIR/redis-sched.txt "<on-CPU ms> <waiting ms>" of Redis's main thread over the erasure.
  erase_watch.py slowlog --redis-port P --entity c-…
      prints "<entries> <entries of the erasure> <longest µs> <longest of the erasure µs>" of
      SLOWLOG.
"""
import argparse
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402
from seed import Redis  # noqa: E402


def sched(pid):
    with open("/proc/%d/task/%d/schedstat" % (pid, pid)) as f:
        run, wait = f.read().split()[:2]
    return int(run), int(wait)


def delete(a):
    r = Redis(a.redis_port)
    rec = "ent:{%s}:erasure" % a.entity
    time.sleep(a.after)
    r.call("SLOWLOG", "RESET")
    u = urllib.parse.urlsplit(a.base)
    s0 = sched(a.redis_pid)
    t0 = time.monotonic()
    c = httpc.Conn(u.hostname, u.port)
    c.send_raw(("DELETE %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n" %
                (a.path, u.netloc)).encode())
    status, _headers, body = c.read_response()
    ms = (time.monotonic() - t0) * 1000
    c.close()
    deadline = t0 + 600
    while time.monotonic() < deadline:
        if r.call("EXISTS", rec) == 0 and r.call("ZCARD", "erasures") == 0:
            break
        time.sleep(0.02)
    secs = time.monotonic() - t0
    s1 = sched(a.redis_pid)
    with open(os.path.join(a.out, "delete.txt"), "w") as f:
        f.write("%d %.1f\n" % (status, ms))
    with open(os.path.join(a.out, "delete-body.json"), "wb") as f:
        f.write(body)
    with open(os.path.join(a.out, "erase-seconds.txt"), "w") as f:
        f.write("%.2f\n" % secs)
    with open(os.path.join(a.out, "redis-sched.txt"), "w") as f:
        f.write("%.0f %.0f\n" % ((s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6))


def slowlog(a):
    r = Redis(a.redis_port)
    tag = ("ent:{%s}" % a.entity).encode()
    ents = r.call("SLOWLOG", "GET", "100000")
    # The erasure's commands (a step's EVALSHA, and the SCAN and UNLINK it runs, which SLOWLOG
    # lists too) name the entity's keys; nothing else does after the delete.
    er = [e for e in ents if any(x.startswith(tag) for x in e[3])]
    print("%d %d %d %d" % (len(ents), len(er), max([e[2] for e in ents] or [0]),
                           max([e[2] for e in er] or [0])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["delete", "slowlog"])
    ap.add_argument("--base")
    ap.add_argument("--path")
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-pid", type=int)
    ap.add_argument("--entity", required=True)
    ap.add_argument("--out")
    ap.add_argument("--after", type=float, default=0)
    a = ap.parse_args()
    (delete if a.what == "delete" else slowlog)(a)


if __name__ == "__main__":
    main()
