"""idle_conns: open N keep-alive connections, each after one GET /healthz, hold them idle and
report the server's RSS meanwhile.

  idle_conns.py HOST PORT N PID [HOLD_SECONDS]

Raises this process's RLIMIT_NOFILE soft limit to the hard limit. Every connection answers one
request first (so it is an idle keep-alive connection, past its header timer), then the
script waits HOLD_SECONDS (default 2), reads VmRSS of PID from /proc, prints
"idle_conns=N open=M rss_kib=K", and closes them all. Every wait is bounded.
"""
import asyncio
import resource
import sys
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


async def open_one(host, port, sem, conns, failures):
    async with sem:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 20)
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


async def main(host, port, n, pid, hold):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns, failures = [], []
    sem = asyncio.Semaphore(256)
    t0 = time.monotonic()
    await asyncio.gather(*(open_one(host, port, sem, conns, failures) for _ in range(n)))
    opened = time.monotonic() - t0
    await asyncio.sleep(hold)
    rss = rss_kib(pid)
    # Still open? A closed connection reads EOF at once.
    alive = sum(1 for r, _ in conns if not r.at_eof())
    print("idle_conns=%d open=%d alive=%d rss_kib=%d open_seconds=%.2f failures=%d%s" % (
        n, len(conns), alive, rss, opened, len(failures),
        (" first_failure=" + failures[0]) if failures else ""))
    for _, w in conns:
        w.close()
    await asyncio.sleep(0.5)
    return 0 if len(conns) == n else 1


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                              float(sys.argv[5]) if len(sys.argv) == 6 else 2.0)))
