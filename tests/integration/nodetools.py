"""The Node tools the sign-in tests run (tests/node): the siwe library's parser, ethers' signer,
and a local chain (ganache) with Safe 1.4.1 contracts. Each process is started and stopped by
PID."""

import json
import os
import select
import shutil
import subprocess
import time

import harness

NODE_DIR = os.path.join(harness.REPO, 'tests', 'node')
NODE = shutil.which('node') or '/usr/bin/node'


def available():
    return os.path.isdir(os.path.join(NODE_DIR, 'node_modules', 'ganache')) and os.path.exists(NODE)


def siwe_tool(message, key=None, timeout=60):
    """{'parsed': {...}, 'prepared': text} or {'error': ...}; with key, also 'signature'."""
    req = {'message': message}
    if key:
        req['key'] = key
    p = subprocess.run([NODE, os.path.join(NODE_DIR, 'siwe_tool.js')], input=json.dumps(req),
                       capture_output=True, text=True, timeout=timeout, cwd=NODE_DIR)
    if p.returncode != 0:
        raise RuntimeError('siwe_tool.js failed: %s' % p.stderr[-2000:])
    return json.loads(p.stdout)


class SafeChain:
    """ganache on a free loopback port with a 1-of-1 and a 2-of-3 Safe (safe_chain.js)."""

    def __init__(self, timeout=None):
        self.proc = subprocess.Popen([NODE, os.path.join(NODE_DIR, 'safe_chain.js')],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=NODE_DIR)
        try:
            self.info = self._read(timeout or harness.scaled(120))
        except Exception:
            self.stop()
            raise
        self.rpc = self.info['rpc']
        self.keys = self.info['keys']
        self.owners = [a.lower() for a in self.info['owners']]

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError('safe_chain.js exited: %s' % self.proc.stderr.read()[-2000:])
                return json.loads(line)
            if self.proc.poll() is not None:
                raise RuntimeError('safe_chain.js exited: %s' % self.proc.stderr.read()[-2000:])
        raise RuntimeError('safe_chain.js did not answer within %.0f s' % timeout)

    def safe(self, name):
        return self.info['safes'][name]['address'].lower()

    def sign(self, safe, hash_hex, owner_indexes):
        """The Safe signature of hash (0x hex): the owners' SafeMessage signatures, sorted."""
        keys = [self.keys[i] for i in owner_indexes]
        self.proc.stdin.write(json.dumps({'cmd': 'sign', 'safe': safe, 'hash': hash_hex,
                                          'keys': keys}) + '\n')
        self.proc.stdin.flush()
        out = self._read(harness.scaled(30))
        return out['signature']

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({'cmd': 'stop'}) + '\n')
                self.proc.stdin.flush()
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass


personal_hash = harness.personal_hash  # the EIP-191 hash of a message, 0x hex
