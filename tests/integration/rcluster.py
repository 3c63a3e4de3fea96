"""A local Redis Cluster for the tests: cluster-enabled redis-servers on loopback, built with
`redis-cli --cluster create`, each server started and stopped by its PID (harness.Redis).

  RedisCluster(primaries=3, replicas=1, create=True)
      .nodes [harness.Redis]  .seeds 'host:port,...'  .cluster_nodes (the same; Entityd
      reads it to run in cluster mode)  .cli(*args) routed by the key's slot, following
      MOVED/ASK; SCAN, FLUSHALL, DBSIZE and SCRIPT go to every primary, DEBUG to all of them at once
      .primaries() .primary_of(key) .node_of_port(p) .create() .wait_ok()
      .migrate_slot(slot, dst) .kill() .start() (again after kill(): the same cluster)
  key_slot(key): the slot by the Redis Cluster specification (CRC16/XMODEM of the hash tag)
"""

import os
import random
import socket
import subprocess
import shutil
import threading

import harness
from harness import RespError, scaled, wait_for

REDIS_CLI = shutil.which('redis-cli') or '/usr/bin/redis-cli'
NODE_TIMEOUT_MS = 2000


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xffff if crc & 0x8000 else (crc << 1) & 0xffff
    return crc


def key_slot(key):
    if isinstance(key, str):
        key = key.encode()
    s = key.find(b'{')
    if s >= 0:
        e = key.find(b'}', s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) & 16383


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def cluster_ports(n):
    """n ports whose bus port (+10000) is free too, both below the kernel's ephemeral range
    (from 32768), where an outgoing connection could take one meanwhile."""
    out = []
    for _ in range(2000):
        p = random.randrange(12000, 22700)
        if p in out or p + 10000 in out:
            continue
        if _port_free(p) and _port_free(p + 10000):
            out.append(p)
            if len(out) == n:
                return out
    raise RuntimeError('no free cluster ports')


def _decode(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


class RedisCluster:

    def __init__(self, primaries=3, replicas=1, create=True, node_timeout=NODE_TIMEOUT_MS,
                 start=True, appendonly=False, appendfsync=None):
        self.replicas = replicas
        self.created = False
        self.nodes = []
        # A port checked free may be taken before the server binds it (tests run side by
        # side): start again on other ports, a bounded number of times.
        for attempt in range(5):
            try:
                for p in cluster_ports(primaries * (1 + replicas)):
                    self.nodes.append(harness.Redis(
                        port=p, start=start, appendonly=appendonly, appendfsync=appendfsync,
                        extra_args=['--cluster-enabled', 'yes', '--cluster-config-file',
                                    'nodes.conf', '--cluster-node-timeout', str(node_timeout),
                                    '--enable-debug-command', 'local',
                                    '--cluster-require-full-coverage', 'yes']))
                break
            except TimeoutError:
                self.kill()
                self.nodes = []
                if attempt == 4:
                    raise
        if start and create:
            self.create()

    def start(self, timeout=None):
        """Starts the nodes not running (same ports and directories: a node keeps its
        nodes.conf, and with appendonly its data); the first time, builds the cluster."""
        for n in self.nodes:
            if n.proc is None:
                n.start(timeout=timeout)
        if self.created:
            self.wait_ok()
            self.wait_synced()
        else:
            self.create()
        return self

    @property
    def seeds(self):
        return ','.join('127.0.0.1:%d' % n.port for n in self.nodes)

    cluster_nodes = seeds

    @property
    def url(self):
        return 'redis://127.0.0.1:%d/0' % self.nodes[0].port

    def create(self):
        args = [REDIS_CLI, '--cluster', 'create'] + ['127.0.0.1:%d' % n.port for n in self.nodes]
        args += ['--cluster-replicas', str(self.replicas), '--cluster-yes']
        p = subprocess.run(args, capture_output=True, timeout=scaled(60))
        if p.returncode != 0:
            raise RuntimeError('redis-cli --cluster create failed: %s' %
                               (p.stdout + p.stderr).decode(errors='replace')[-3000:])
        self.created = True
        self.wait_ok()
        self.wait_synced()

    def wait_synced(self, timeout=None):
        """Every live replica has finished its sync with its primary: a replica that never did
        cannot be promoted (its data has no age Redis trusts)."""
        def synced():
            for n in self.live():
                info = _decode(n.cli('INFO', 'replication'))
                if 'role:slave' in info and 'master_link_status:up' not in info:
                    return False
            return True
        wait_for(synced, timeout or scaled(30), interval=0.1, what='replicas in sync')

    def live(self):
        return [n for n in self.nodes if n.proc is not None and not n.paused]

    def wait_ok(self, timeout=None):
        """Every live node says cluster_state:ok and agrees that all 16384 slots are served."""
        def ok():
            for n in self.live():
                info = _decode(n.cli('CLUSTER', 'INFO'))
                if 'cluster_state:ok' not in info or 'cluster_slots_ok:16384' not in info:
                    return False
            return True
        wait_for(ok, timeout or scaled(30), interval=0.1, what='cluster_state:ok everywhere')

    def slots(self):
        """[(lo, hi, port of the primary)] from the first live node that answers."""
        for n in self.live():
            try:
                return [(r[0], r[1], r[2][1]) for r in n.cli('CLUSTER', 'SLOTS')]
            except (OSError, RespError):
                continue
        raise RuntimeError('no cluster node answers')

    def node_of_port(self, port):
        return next(n for n in self.nodes if n.port == port)

    def primaries(self):
        return sorted({self.node_of_port(p) for _, _, p in self.slots()}, key=lambda n: n.port)

    def primary_of(self, key):
        s = key_slot(key)
        for lo, hi, p in self.slots():
            if lo <= s <= hi:
                return self.node_of_port(p)
        raise RuntimeError('slot %d not served' % s)

    def node_id(self, node):
        return _decode(node.cli('CLUSTER', 'MYID'))

    def cli(self, *args, timeout=5.0):
        cmd = str(args[0]).upper()
        if cmd in ('SCAN', 'KEYS'):
            keys = []
            for n in self.primaries():
                if cmd == 'KEYS':
                    keys += n.cli(*args, timeout=timeout)
                    continue
                cursor = '0'
                while True:
                    cursor, batch = n.cli('SCAN', cursor, *args[2:], timeout=timeout)
                    keys += batch
                    if _decode(cursor) == '0':
                        break
            return keys if cmd == 'KEYS' else [b'0', keys]
        if cmd in ('FLUSHALL', 'FLUSHDB', 'SCRIPT', 'CONFIG'):
            out = None
            for n in self.primaries():
                out = n.cli(*args, timeout=timeout)
            return out
        if cmd == 'DEBUG':
            # The whole cluster at once (DEBUG SLEEP: every primary sleeps together).
            nodes = self.primaries()
            out = [None] * len(nodes)

            def one(i):
                out[i] = nodes[i].cli(*args, timeout=timeout)
            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(nodes))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout + 1)
            return out[0]
        if cmd in ('DBSIZE',):
            return sum(n.cli(*args, timeout=timeout) for n in self.primaries())
        if len(args) < 2:
            return self.primaries()[0].cli(*args, timeout=timeout)
        node = self.primary_of(args[1])
        for _ in range(5):
            try:
                return node.cli(*args, timeout=timeout)
            except RespError as e:
                words = str(e).split()
                if words and words[0] in ('MOVED', 'ASK'):
                    node = self.node_of_port(int(words[2].rsplit(':', 1)[1]))
                    continue
                raise
        raise RuntimeError('too many redirects for %r' % (args,))

    def migrate_slot(self, slot, dst, keys_first=None):
        """Moves a slot to dst the way redis-cli reshard does: IMPORTING/MIGRATING, MIGRATE
        every key, SETSLOT NODE everywhere. keys_first(src, dst) runs between the states being
        set and the keys moving (to look at the ASK window)."""
        src = None
        for lo, hi, p in self.slots():
            if lo <= slot <= hi:
                src = self.node_of_port(p)
        if src is dst:
            return
        src_id, dst_id = self.node_id(src), self.node_id(dst)
        dst.cli('CLUSTER', 'SETSLOT', slot, 'IMPORTING', src_id)
        src.cli('CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst_id)
        if keys_first:
            keys_first(src, dst)
        while True:
            keys = src.cli('CLUSTER', 'GETKEYSINSLOT', slot, 100)
            if not keys:
                break
            src.cli('MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', *keys)
        for n in (dst, src):
            n.cli('CLUSTER', 'SETSLOT', slot, 'NODE', dst_id)
        for n in self.primaries():
            if n not in (src, dst):
                n.cli('CLUSTER', 'SETSLOT', slot, 'NODE', dst_id)
        self.wait_slot(slot, dst)

    def wait_slot(self, slot, node, timeout=None):
        """Every live node's CLUSTER SLOTS says node serves slot."""
        def agreed():
            for n in self.live():
                rows = n.cli('CLUSTER', 'SLOTS')
                if not any(r[0] <= slot <= r[1] and r[2][1] == node.port for r in rows):
                    return False
            return True
        wait_for(agreed, timeout or scaled(20), interval=0.05, what='slot %d agreed' % slot)

    def kill(self):
        for n in self.nodes:
            n.kill()

    stop = kill


class Sentinel(harness.Redis):
    """One redis-server --sentinel watching `master_name` at 127.0.0.1:primary_port."""

    def __init__(self, master_name, primary_port, quorum=2):
        super().__init__(start=False)
        self.conf = os.path.join(self.dir, 'sentinel.conf')
        with open(self.conf, 'w') as f:  # Sentinel rewrites it: a file of its own
            f.write('port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n'
                    'dir %s\nlogfile ""\n'
                    'sentinel monitor %s 127.0.0.1 %d %d\n'
                    'sentinel down-after-milliseconds %s 1000\n'
                    'sentinel failover-timeout %s 5000\n' %
                    (self.port, self.dir, master_name, primary_port, quorum, master_name,
                     master_name))
        self.start()

    def _args(self):
        return [harness.REDIS_SERVER, self.conf, '--sentinel']


class SentinelSet:
    """A primary, its replica and three sentinels, each started and stopped by its PID.

      .sentinels 'host:port,...'  .master_name (Entityd reads both: sentinel mode)
      .primary() the node the sentinels name now  .cli(*args) on it  .failover()  .kill()
    """

    master_name = 'mymaster'

    def __init__(self, n_sentinels=3):
        a = harness.Redis()
        b = harness.Redis(extra_args=['--replicaof', '127.0.0.1', str(a.port)])
        self.nodes = [a, b]
        self.watchers = []
        self.watchers = [Sentinel(self.master_name, a.port) for _ in range(n_sentinels)]

        def settled():
            info = _decode(b.cli('INFO', 'replication'))
            if 'master_link_status:up' not in info:
                return False
            for s in self.watchers:
                if len(s.cli('SENTINEL', 'replicas', self.master_name)) < 1:
                    return False
                if len(s.cli('SENTINEL', 'sentinels', self.master_name)) < n_sentinels - 1:
                    return False
            return True
        wait_for(settled, scaled(30), interval=0.1, what='sentinels settled')

    @property
    def sentinels(self):
        return ','.join('127.0.0.1:%d' % s.port for s in self.watchers)

    def primary(self):
        for s in self.watchers:
            try:
                _, port = _decode(s.cli('SENTINEL', 'get-master-addr-by-name', self.master_name))
                return next(n for n in self.nodes if n.port == int(port))
            except (OSError, RespError):
                continue
        raise RuntimeError('no sentinel answers')

    def cli(self, *args, timeout=5.0):
        return self.primary().cli(*args, timeout=timeout)

    def failover(self):
        return self.watchers[0].cli('SENTINEL', 'FAILOVER', self.master_name)

    def kill(self):
        for n in self.watchers + self.nodes:
            n.kill()

    stop = kill
