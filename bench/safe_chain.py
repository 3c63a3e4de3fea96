#!/usr/bin/env python3
"""For scripts/bench-auth: a local chain with Safe 1.4.1 (tests/node/safe_chain.js, by PID), and
the signed path of a 2-of-3 Safe for the service's current sign-in message.

usage: safe_chain.py BASE_URL ENTITY_ID OUT_FILE
Writes "rpc=URL" and "path=/api/entities/ID?address=SAFE&signature=SIG" lines to OUT_FILE, then
keeps the chain up until SIGTERM (or SIGINT)."""

import json
import os
import signal
import sys
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
import nodetools  # noqa: E402


def main():
    base, eid, out = sys.argv[1:4]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    chain = nodetools.SafeChain()
    try:
        with urllib.request.urlopen(base + '/api/auth/message', timeout=10) as r:
            msg = json.load(r)['data']['message']
        safe = chain.safe('twoOfThree')
        sig = chain.sign(safe, nodetools.personal_hash(msg), [0, 1])
        with open(out + '.tmp', 'w') as f:
            f.write('rpc=%s\npath=/api/entities/%s?address=%s&signature=%s\n' %
                    (chain.rpc, eid, safe, sig))
        os.rename(out + '.tmp', out)
        while not stop.wait(1):
            pass
    finally:
        chain.stop()


if __name__ == '__main__':
    main()
