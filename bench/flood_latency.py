"""flood_latency: /healthz latency while the signature-check pool has a deep queue.

  flood_latency.py HOST PORT PATHS_FILE [CONNS [SAMPLES [MAX_ROUNDS]]]

A child process (this script with --flood) opens CONNS (default 10000) connections, then on
each "go" sends one signed request (PATHS_FILE, cycled) on every connection at once, so
CONNS signature checks are queued together, and reads every answer. Meanwhile this process
times sequential GET /healthz on its own keep-alive connection until the round is answered;
rounds repeat until SAMPLES (default 1000) samples were taken under load or MAX_ROUNDS (default
10) rounds ran. Prints the idle and loaded /healthz percentiles, the flood's counts, the five
slowest samples (with when they started after the round's go) and, per round, how the threads
of the sampler, the flood and (ENTITYD_PID set) entityd spent it: % on a CPU / % runnable but
waiting for one.
Both processes raise RLIMIT_NOFILE to the hard limit; every wait is bounded.
"""
import os
import resource
import select
import selectors
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")


# ---- the flood (child) ---------------------------------------------------------------------

def flood(host, port, paths_file, nconns):
    raise_nofile()
    paths = httpc.read_lines(paths_file)
    reqs = [("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (p, host, port)).encode() for p in paths]
    sel = selectors.DefaultSelector()
    socks = []
    deadline = time.monotonic() + 60
    # Connect in batches, so the listen backlog never overflows.
    while len(socks) < nconns and time.monotonic() < deadline:
        batch = []
        for _ in range(min(500, nconns - len(socks))):
            s = socket.socket()
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.connect_ex((host, port))
            batch.append(s)
            sel.register(s, selectors.EVENT_WRITE)
        pending = set(batch)
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                if key.fileobj in pending:
                    pending.discard(key.fileobj)
                    sel.unregister(key.fileobj)
        for s in batch:
            if s in pending or s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                print("error connect failed after %d connections" % len(socks), flush=True)
                return 1
        socks += batch
    if len(socks) < nconns:
        print("error connecting timed out at %d connections" % len(socks), flush=True)
        return 1
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    print("ready %d" % len(socks), flush=True)
    for cmd in sys.stdin:
        if cmd.strip() != "go":
            break
        bufs = {s: b"" for s in socks}
        ok = bad = 0
        statuses = {}
        t0 = time.monotonic()
        for i, s in enumerate(socks):
            s.send(reqs[i % len(reqs)])
        waiting = set(socks)
        deadline = time.monotonic() + 120
        while waiting and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                s = key.fileobj
                if s not in waiting:
                    continue
                data = s.recv(65536)
                if not data:
                    waiting.discard(s)
                    bad += 1
                    continue
                bufs[s] += data
                head, sep, rest = bufs[s].partition(b"\r\n\r\n")
                if not sep:
                    continue
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if len(rest) >= length:
                    status = int(head.split(b" ", 2)[1])
                    statuses[status] = statuses.get(status, 0) + 1
                    ok += status == 200
                    bad += status != 200
                    waiting.discard(s)
        secs = time.monotonic() - t0
        print("done ok=%d bad=%d unanswered=%d seconds=%.3f statuses=%s" % (
            ok, bad, len(waiting), secs,
            ",".join("%d:%d" % kv for kv in sorted(statuses.items()))), flush=True)
        if waiting:
            break
    for s in socks:
        s.close()
    return 0


# ---- the sampler (parent) ------------------------------------------------------------------

def schedstat(procs):
    """{(name, tid): (on-cpu ns, runqueue-wait ns)} for every thread of every (name, pid)."""
    out = {}
    for name, pid in procs:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    run, wait = f.read().split()[:2]
            except OSError:
                continue
            label = name if int(tid) == pid else "%s.%s" % (name, tid)
            out[label] = (int(run), int(wait))
    return out


def sched_line(a, b, seconds):
    """"name on-CPU%/waiting% ..." over the interval, threads that did something."""
    parts = []
    for k in sorted(b):
        if k in a:
            run = (b[k][0] - a[k][0]) / seconds / 1e7
            wait = (b[k][1] - a[k][1]) / seconds / 1e7
            if run >= 1 or wait >= 1:
                parts.append("%s %.0f/%.0f" % (k, run, wait))
    return ", ".join(parts)


def readline_timeout(f, seconds):
    r, _, _ = select.select([f], [], [], seconds)
    return f.readline().decode().strip() if r else None


def main(argv):
    if argv and argv[0] == "--flood":
        return flood(argv[1], int(argv[2]), argv[3], int(argv[4]))
    if not 3 <= len(argv) <= 6:
        sys.stderr.write(__doc__)
        return 2
    host, port, paths_file = argv[0], int(argv[1]), argv[2]
    nconns = int(argv[3]) if len(argv) > 3 else 10000
    want = int(argv[4]) if len(argv) > 4 else 1000
    max_rounds = int(argv[5]) if len(argv) > 5 else 10
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--flood", host,
                              str(port), paths_file, str(nconns)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = readline_timeout(child.stdout, 90)
        if not line or not line.startswith("ready"):
            print("flood: not ready: %s" % line)
            return 1
        hc = httpc.Conn(host, port)
        idle = []
        for _ in range(200):
            t = time.perf_counter()
            status, _, _ = hc.request("GET", "/healthz")
            idle.append((time.perf_counter() - t) * 1e3)
            if status != 200:
                print("healthz answered %d" % status)
                return 1
        busy, rounds, results, worst, sched = [], 0, [], [], []
        # ENTITYD_PID (optional): how entityd's threads, this sampler and the flood spent
        # each round (% on a CPU / % runnable but waiting for one).
        procs = [("sampler", os.getpid()), ("flood", child.pid)]
        if os.environ.get("ENTITYD_PID"):
            procs.insert(0, ("entityd", int(os.environ["ENTITYD_PID"])))
        while len(busy) < want and rounds < max_rounds:
            rounds += 1
            child.stdin.write(b"go\n")
            child.stdin.flush()
            go = time.perf_counter()
            s0 = schedstat(procs)
            end = time.monotonic() + 150
            done = None
            while time.monotonic() < end:
                t = time.perf_counter()
                status, _, _ = hc.request("GET", "/healthz")
                dt = (time.perf_counter() - t) * 1e3
                r, _, _ = select.select([child.stdout], [], [], 0)
                if r:
                    done = child.stdout.readline().decode().strip()
                    break  # the round ended during this sample: not counted as loaded
                if status != 200:
                    print("healthz answered %d under load" % status)
                    return 1
                busy.append(dt)
                worst.append((dt, rounds, t - go))
                if len(busy) >= want:
                    break
            if done is None:
                done = readline_timeout(child.stdout, 150)
            sched.append(sched_line(s0, schedstat(procs), time.perf_counter() - go))
            results.append(done)
            if not done or not done.startswith("done") or "unanswered=0" not in done:
                print("flood round failed: %s" % done)
                return 1
        hc.close()
        print("healthz_idle samples=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f" % (
            len(idle), pct(idle, 50), pct(idle, 99), max(idle)))
        print("healthz_loaded samples=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f" % (
            len(busy), pct(busy, 50), pct(busy, 99), max(busy) if busy else float("nan")))
        for i, r in enumerate(results):
            print("flood_round=%d conns=%d %s" % (i + 1, nconns, r))
            print("flood_round=%d threads (%% on-CPU/%% waiting for a CPU): %s" % (i + 1, sched[i]))
        worst.sort(reverse=True)
        print("healthz_slowest " + " ".join("%.1fms@round%d+%.3fs" % w for w in worst[:5]))
        return 0
    finally:
        try:
            child.stdin.write(b"quit\n")
            child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
