"""A test chain for join rules: tests/node/join_chain.cjs (ganache in-process, chain id 1337,
a batch reader with Multicall3's interface and OpenZeppelin ERC-20/721/1155 test tokens compiled
by solc at start) on a free loopback port, driven by JSON-line commands, stopped by PID; and the
fault proxy (faultproxy.FaultProxy) in front of it, counting the HTTP requests that hold an
eth_call and able to stall the chain (stop answering) and resume it.

    chain = JoinChain()              # .rpc .chain_id .multicall .erc20 .erc721 .erc1155
    chain.mint('erc20', addr, amount=10)
    chain.balance('erc721', token_id=7)   # -> owner address or None
    proxy = chain.proxy()            # give entityd proxy_url(proxy) as the chain's URL
    proxy.counted(ETH_CALLS)         # eth_call requests passed on so far
    proxy.stall(); proxy.release()
    chain.stop()

    reader = JoinReader({'ETH_RPC_URLS': '1337=' + proxy_url(proxy), ...})
    reader.read(rule, addresses)     # -> the answer of entityd-joinread (one joinread)
    reader.stop()                    # -> its stderr; fails on a sanitizer report
"""

import json
import os
import select
import shutil
import signal
import subprocess
import time

from .base import ENTITYD_JOINREAD_BIN, REPO, SANITIZER_MARKERS, _live, free_port, scaled
from .faultproxy import FaultProxy

NODE_DIR = os.path.join(REPO, 'tests', 'node')
NODE = shutil.which('node') or '/usr/bin/node'
CHAIN_ID = 1337
# count() patterns of the proxy: HTTP requests (each a POST) holding an eth_call.
ETH_CALLS, REQUEST = rb'"eth_call"', rb'POST /'


def chain_available():
    return (os.path.isdir(os.path.join(NODE_DIR, 'node_modules', 'ganache')) and
            os.path.isdir(os.path.join(NODE_DIR, 'node_modules', 'solc')) and
            os.path.exists(NODE))


def proxy_url(proxy):
    return 'http://127.0.0.1:%d' % proxy.port


class _NodeProcess:
    """A child process of a test (self.proc) killed and reaped by its PID, its pipes closed."""

    def _force_kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def _reap(self):
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass
        if self in _live:
            _live.remove(self)


class JoinChain(_NodeProcess):
    """ganache with the join-rule test contracts, on a free loopback port."""

    def __init__(self, timeout=None):
        self.proc = None
        for attempt in range(3):  # a lost race for the free port: take another
            self.proc = subprocess.Popen([NODE, os.path.join(NODE_DIR, 'join_chain.cjs'),
                                          str(free_port())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, cwd=NODE_DIR)
            _live.append(self)
            try:
                self.info = self._read(timeout or scaled(120))
                break
            except RuntimeError:
                self._force_kill()
                if attempt == 2:
                    raise
        self.rpc = self.info['rpc']
        self.port = self.info['port']
        self.chain_id = self.info['chainId']
        self.multicall = self.info['multicall']
        self.erc20 = self.info['erc20']
        self.erc721 = self.info['erc721']
        self.erc1155 = self.info['erc1155']
        self.funder = self.info['funder']
        self.proxies = []

    @property
    def pid(self):
        return self.proc.pid

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError('join_chain.cjs exited: %s' %
                                       self.proc.stderr.read()[-2000:])
                return json.loads(line)
            if self.proc.poll() is not None:
                raise RuntimeError('join_chain.cjs exited: %s' % self.proc.stderr.read()[-2000:])
        raise RuntimeError('join_chain.cjs did not answer within %.0f s' % timeout)

    def cmd(self, **kw):
        """One command, its answer (RuntimeError when the tool answers an error)."""
        self.proc.stdin.write(json.dumps(kw) + '\n')
        self.proc.stdin.flush()
        out = self._read(scaled(60))
        if 'error' in out:
            raise RuntimeError('join_chain.cjs %s: %s' % (kw.get('cmd'), out['error']))
        return out

    @staticmethod
    def _args(amount, token_id):
        a = {}
        if amount is not None:
            a['amount'] = str(amount)
        if token_id is not None:
            a['tokenId'] = str(token_id)
        return a

    def mint(self, token, to, amount=None, token_id=None):
        return self.cmd(cmd='mint', token=token, to=to, **self._args(amount, token_id))['block']

    def burn(self, token, frm=None, amount=None, token_id=None):
        extra = {'from': frm} if frm else {}
        return self.cmd(cmd='burn', token=token, **extra,
                        **self._args(amount, token_id))['block']

    def transfer(self, token, frm, to, amount=None, token_id=None):
        return self.cmd(cmd='transfer', token=token, to=to, **{'from': frm},
                        **self._args(amount, token_id))['block']

    def send(self, to, amount):
        return self.cmd(cmd='send', to=to, amount=str(amount))['block']

    def set_balance(self, address, amount):
        return self.cmd(cmd='setBalance', address=address, amount=str(amount))['block']

    def balance(self, token, address=None, token_id=None):
        """A balance (int), or for erc721 with token_id its owner (None when none)."""
        kw = {'cmd': 'balance', 'token': token}
        if address:
            kw['address'] = address
        if token_id is not None:
            kw['tokenId'] = str(token_id)
        out = self.cmd(**kw)
        return out['owner'] if 'owner' in out else int(out['balance'])

    def mine(self):
        return self.cmd(cmd='mine')['block']

    def block(self):
        return self.cmd(cmd='block')['block']

    def proxy(self):
        """A fault proxy in front of the chain, counting the requests holding an eth_call."""
        p = FaultProxy(self.port).start()
        p.count(ETH_CALLS, per=REQUEST)
        self.proxies.append(p)
        return p

    def stop(self):
        """Ends the proxies, then the chain: asked to stop, SIGKILL by PID past 10 s."""
        for p in self.proxies:
            p.stop()
        self.proxies = []
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({'cmd': 'stop'}) + '\n')
                self.proc.stdin.flush()
                self.proc.wait(10)
            except Exception:
                pass
        self._force_kill()

    def kill(self):
        """SIGKILL by PID: the chain dies at once (a provider gone)."""
        self._force_kill()


class JoinReader(_NodeProcess):
    """entityd-joinread with the given settings (the rest from the defaults), driven by JSON
    lines: each read() sends one request and returns its answer; send() and answers() overlap
    reads as the service does."""

    def __init__(self, env):
        full = {k: v for k, v in os.environ.items()
                if k in ('PATH', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS')}
        full.update(env)
        self.proc = subprocess.Popen([ENTITYD_JOINREAD_BIN], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=full)
        _live.append(self)
        self.next_id = 0
        self.pending = b''
        self.stderr = ''

    def send(self, rule, addresses, background=False, times=1):
        """Sends the request `times` times in one write (so they arrive together); returns the
        ids, or the id when once."""
        ids, lines = [], ''
        for _ in range(times):
            self.next_id += 1
            ids.append(self.next_id)
            lines += json.dumps({'id': self.next_id, 'rule': rule, 'addresses': addresses,
                                 'background': background}) + '\n'
        self.proc.stdin.write(lines)
        self.proc.stdin.flush()
        return ids if times > 1 else ids[0]

    def answers(self, n, timeout=None):
        """The next n answers, by id (read from the pipe itself: several may come in one read,
        which a buffered readline would keep from select)."""
        out = {}
        deadline = time.monotonic() + (timeout or scaled(60))
        fd = self.proc.stdout.fileno()
        while len(out) < n:
            while b'\n' in self.pending and len(out) < n:
                line, self.pending = self.pending.split(b'\n', 1)
                a = json.loads(line)
                out[a['id']] = a
            if len(out) == n:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError('entityd-joinread gave %d of %d answers' % (len(out), n))
            r, _, _ = select.select([fd], [], [], min(left, 0.5))
            if r:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError('entityd-joinread exited: %s' %
                                       self.proc.stderr.read()[-2000:])
                self.pending += chunk
        return out

    def read(self, rule, addresses, background=False, timeout=None):
        i = self.send(rule, addresses, background)
        return self.answers(1, timeout)[i]

    def stop(self):
        """Ends stdin; the tool answers what is in flight and exits. Returns its stderr; raises
        when it exits non-zero or reports a sanitizer error."""
        try:
            self.proc.stdin.close()
        except Exception:
            pass
        try:
            self.proc.wait(scaled(30))
        except subprocess.TimeoutExpired:
            self._force_kill()
            raise RuntimeError('entityd-joinread did not exit at the end of its input')
        self.stderr = self.proc.stderr.read()
        self._reap()
        if any(m in self.stderr for m in SANITIZER_MARKERS) or self.proc.returncode != 0:
            raise RuntimeError('entityd-joinread exited %s: %s' %
                               (self.proc.returncode, self.stderr[-4000:]))
        return self.stderr

