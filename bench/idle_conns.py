"""idle_conns: open N keep-alive connections, each after one GET /healthz, hold them idle and
report the server's RSS meanwhile.

  idle_conns.py HOST PORT N PID [HOLD_SECONDS]

The connections are opened by IDLE_PROCS client processes (default 1), each raising its
RLIMIT_NOFILE soft limit to the hard limit, so N may pass one process's descriptor limit.
IDLE_SOURCES=K (default 1) spreads them over K source addresses 127.0.0.2 … 127.0.0.(K+1): one
source address to one server port has only the ephemeral port range (about 28,000 ports).
Every connection answers one request first (so it is an idle keep-alive connection, past its
header timer); once every client has opened its share, the script waits HOLD_SECONDS (default
2), reads VmRSS and Pss of PID and of its children (a supervisor's workers) from /proc, prints
"idle_conns=N open=M alive=A rss_kib=K pss_kib=P ...", and closes them all. Every wait is
bounded.
"""
import asyncio
import os
import resource
import subprocess
import sys
import time


def own_kib(pid, field):
    path = "/proc/%d/%s" % (pid, "smaps_rollup" if field == "Pss:" else "status")
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_kib(pid, field):
    """The process's figure plus its children's (the workers of a supervisor)."""
    total = own_kib(pid, field)
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                total += sum(own_kib(int(c), field) for c in f.read().split())
        except OSError:
            pass
    return total


async def open_one(host, port, sem, conns, failures, source):
    async with sem:
        try:
            local = (source, 0) if source else None
            r, w = await asyncio.wait_for(
                asyncio.open_connection(host, port, local_addr=local), 20)
            w.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 20)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await asyncio.wait_for(r.readexactly(length), 20)
            if not head.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(head.split(b"\r\n")[0].decode())
            conns.append((r, w))
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
            failures.append(repr(e))


async def child(host, port, n, sources):
    """Opens n connections, says "ready", waits for a line on stdin (at most 600 s), says how
    many are still open, closes them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns, failures = [], []
    sem = asyncio.Semaphore(256)
    await asyncio.gather(*(open_one(host, port, sem, conns, failures, sources[i % len(sources)])
                           for i in range(n)))
    print("ready %d %d %s" % (len(conns), len(failures), failures[0] if failures else "-"),
          flush=True)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.readline), 600)
    except asyncio.TimeoutError:
        pass
    alive = sum(1 for r, _ in conns if not r.at_eof())
    print("alive %d" % alive, flush=True)
    for _, w in conns:
        w.close()
    await asyncio.sleep(0.5)


def main(host, port, n, pid, hold):
    k = int(os.environ.get("IDLE_SOURCES") or 1)
    sources = ["127.0.0.%d" % (2 + i) for i in range(k)] if k > 1 else [""]
    procs = max(1, int(os.environ.get("IDLE_PROCS") or 1))
    t0 = time.monotonic()
    kids = []
    for p in range(procs):
        share = n // procs + (1 if p < n % procs else 0)
        mine = sources[p::procs] or [sources[p % len(sources)]]
        kids.append(subprocess.Popen(
            [sys.executable, __file__, "--child", host, str(port), str(share), ",".join(mine)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    opened = failed = 0
    first = "-"
    for c in kids:  # each says "ready" once its share is open (each open is bounded: 20 s)
        parts = (c.stdout.readline() or "ready 0 0 gone").split(" ", 3)
        opened += int(parts[1])
        failed += int(parts[2])
        if first == "-":
            first = parts[3].strip()
    opened_s = time.monotonic() - t0
    time.sleep(hold)
    rss, pss = tree_kib(pid, "VmRSS:"), tree_kib(pid, "Pss:")
    alive = 0
    for c in kids:
        c.stdin.write("close\n")
        c.stdin.flush()
        line = c.stdout.readline().split()
        alive += int(line[1]) if len(line) == 2 else 0
    for c in kids:
        try:
            c.wait(30)
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
    print("idle_conns=%d open=%d alive=%d rss_kib=%d pss_kib=%d open_seconds=%.2f failures=%d%s"
          % (n, opened, alive, rss, pss, opened_s, failed,
             (" first_failure=" + first) if failed else ""))
    return 0 if opened == n else 1


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        asyncio.run(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                          [s or None for s in sys.argv[5].split(",")]))
        sys.exit(0)
    if len(sys.argv) not in (5, 6):
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                  float(sys.argv[5]) if len(sys.argv) == 6 else 2.0))
