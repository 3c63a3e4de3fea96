"""The processes a test starts: a private redis-server and entityd on loopback, each stopped
by its PID; waits on their state, and one loop turn of entityd (SIGSTOP/SIGCONT)."""

import json
import os
import signal
import subprocess
import time

from .base import (ENTITYD_BIN, ENTITYD_INSTANCES, LIMITS_OFF, REDIS_SERVER,
                   SANITIZER_MARKERS, SERVICE_ENV_KEYS, TEST_SECRET, TEST_WORKERS, AbortWait,
                   _live, free_port, scaled, tmpdir, wait_for)
from .resp import resp_command
from .web import RawConn, http_request_bytes, request


def _wait_pid(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def _kill_now(proc):
    """SIGKILL by PID unless the process has exited; reaped (10 s at most)."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait_pid(proc, 10)


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise RuntimeError('no VmRSS for pid %d' % pid)


class Redis:
    """A private redis-server on 127.0.0.1, in the foreground, with its own directory."""

    def __init__(self, port=None, appendonly=False, appendfsync=None, extra_args=(),
                 password=None, start=True):
        self._port_chosen = port is None
        self.port = port or free_port()
        self.dir = tmpdir('redis-')
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = list(extra_args)
        self.password = password
        self.proc = None
        self.paused = False
        self._log = None
        self.starts = 0
        if start:
            self.start()

    @property
    def url(self):
        auth = (':%s@' % self.password) if self.password else ''
        return 'redis://%s127.0.0.1:%d/0' % (auth, self.port)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def _args(self):
        a = [REDIS_SERVER, '--port', str(self.port), '--bind', '127.0.0.1', '--save', '',
             '--daemonize', 'no', '--dir', self.dir, '--logfile', '',
             '--appendonly', 'yes' if self.appendonly else 'no', '--protected-mode', 'no',
             # A replica syncs from a file: Redis 7's default, a diskless transfer, first waits
             # 5 s for more replicas to share it (every cluster the tests build, and every
             # resync after a failover or restart, sat through that), and afterwards streams
             # the primary's writes only from the replica's next ACK, up to a second later: a
             # primary killed in that window loses writes it acknowledged, and a test of
             # failover sees them gone.
             '--repl-diskless-sync', 'no']
        if self.appendfsync:
            a += ['--appendfsync', self.appendfsync]
        if self.password:
            a += ['--requirepass', self.password]
        return a + self.extra_args

    def start(self, timeout=None):
        assert self.proc is None, 'redis already running'
        self.starts += 1
        self._log = open(os.path.join(self.dir, 'redis-%d.log' % self.starts), 'wb')
        deadline = time.monotonic() + (timeout or scaled(10))
        # The port may still be held briefly after a kill; retry a bounded number of times.
        while True:
            self.proc = subprocess.Popen(self._args(), stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir)
            _live.append(self)
            self.paused = False
            try:
                wait_for(self._pinged, max(0.1, min(5.0, deadline - time.monotonic())),
                         what='redis PING on port %d' % self.port)
                return self
            except TimeoutError:
                exited = self.proc.poll() is not None
                self._force_kill()
                if not exited or time.monotonic() >= deadline:
                    raise TimeoutError('redis-server did not start on port %d: %s' %
                                       (self.port, self.log_text()[-2000:]))
                if self._port_chosen and self.starts == 1:
                    self.port = free_port()  # lost a race for the port: take another
                time.sleep(0.1)

    def _pinged(self):
        if self.proc.poll() is not None:
            raise TimeoutError('redis exited with %s' % self.proc.returncode)
        return resp_command(self.port, 'PING', timeout=0.5, password=self.password) == 'PONG'

    def log_text(self):
        try:
            out = []
            for n in range(1, self.starts + 1):
                with open(os.path.join(self.dir, 'redis-%d.log' % n), 'rb') as f:
                    out.append(f.read().decode(errors='replace'))
            return ''.join(out)
        except OSError:
            return ''

    def cli(self, *args, timeout=5.0):
        return resp_command(self.port, *args, timeout=timeout, password=self.password)

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def _reap(self):
        if self.proc is not None and self.proc.poll() is not None:
            if self in _live:
                _live.remove(self)
            self.proc = None
            if self._log:
                self._log.close()
                self._log = None

    def _force_kill(self):
        if self.proc is None:
            return
        _kill_now(self.proc)
        self.paused = False
        self._reap()

    def kill(self):
        """SIGKILL by PID; returns once the process is gone."""
        self._force_kill()

    def stop(self, timeout=10):
        """SIGTERM by PID (a paused server is resumed first); SIGKILL past the deadline."""
        if self.proc is None:
            return None
        if self.paused:
            self.resume()
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        rc = _wait_pid(self.proc, timeout)
        if rc is None:
            self._force_kill()
        rc = self.proc.returncode if self.proc else rc
        self._reap()
        return rc

    def restart(self, timeout=None):
        """Starts again on the same port and directory (after kill() or stop())."""
        if self.proc is not None:
            self.kill()
        return self.start(timeout=timeout)


# --------------------------------------------------------------------------------------------
# entityd

class Entityd:
    """One entityd process. Its stdout (JSON log lines) and stderr go to files."""

    def __init__(self, redis=None, env=None, args=(), wait_ready=True, secret=TEST_SECRET,
                 start=True, binary=None):
        self.redis = redis
        self.extra_env = dict(env or {})
        self.args = list(args)
        self.secret = secret
        self.binary = binary or ENTITYD_BIN
        self.dir = tmpdir('entityd-')
        self.stdout_path = os.path.join(self.dir, 'stdout.log')
        self.stderr_path = os.path.join(self.dir, 'stderr.log')
        self.proc = None
        self.port = None
        self.returncode = None
        self.killed = False
        ENTITYD_INSTANCES.append(self)
        if start:
            self.start(wait_ready=wait_ready)

    def env(self):
        e = {k: v for k, v in os.environ.items() if k not in SERVICE_ENV_KEYS}
        e['PORT'] = '0'
        e['HOST'] = '127.0.0.1'
        if self.secret is not None:
            e['AUTH_SECRET'] = self.secret
        if getattr(self.redis, 'cluster_nodes', None):
            e['REDIS_CLUSTER_NODES'] = self.redis.cluster_nodes  # rcluster.RedisCluster
        elif getattr(self.redis, 'sentinels', None):
            e['REDIS_SENTINELS'] = self.redis.sentinels  # rcluster.SentinelSet
            e['REDIS_SENTINEL_MASTER'] = self.redis.master_name
        elif self.redis is not None:
            e['REDIS_URL'] = self.redis.url
        e.update(LIMITS_OFF)
        if TEST_WORKERS:
            e['WORKERS'] = TEST_WORKERS
        e.update({k: str(v) for k, v in self.extra_env.items()})
        return e

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, wait_ready=True, timeout=None):
        assert self.proc is None
        timeout = timeout or scaled(15)
        self._out = open(self.stdout_path, 'ab')
        self._err = open(self.stderr_path, 'ab')
        self.proc = subprocess.Popen([self.binary] + self.args, env=self.env(), stdout=self._out,
                                     stderr=self._err, stdin=subprocess.DEVNULL, cwd=self.dir)
        self.returncode = None
        _live.append(self)
        deadline = time.monotonic() + timeout
        try:
            self.port = wait_for(self._listening_port, timeout, what='entityd "listening" line')
            if wait_ready:
                wait_for(self.ready, max(0.1, deadline - time.monotonic()),
                         what='entityd /readyz 200')
        except TimeoutError as e:
            detail = '%s\nstdout:\n%s\nstderr:\n%s' % (e, self.stdout()[-3000:],
                                                        self.stderr()[-3000:])
            self._force_kill()
            raise TimeoutError(detail) from None
        return self

    def _listening_port(self):
        if self.proc.poll() is not None:
            raise RuntimeError('entityd exited with %s' % self.proc.returncode)
        for rec in self.logs():
            if rec.get('msg') == 'listening' and rec.get('port'):
                return int(rec['port'])
        return None

    def ready(self):
        try:
            st, _, _ = request(self.port, 'GET', '/readyz', timeout=2)
            return st == 200
        except OSError:
            return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout=None, ready=True):
        """Waits for /readyz to answer 200 (or, with ready=False, anything else); fails at
        once if the process exits meanwhile."""
        def check():
            if not self.alive():
                raise AbortWait('entityd (port %s) exited with %s while waiting for /readyz:\n%s'
                                % (self.port, self.proc.poll() if self.proc else self.returncode,
                                   self.stderr()[-3000:]))
            return self.ready() == ready
        return wait_for(check, timeout or scaled(8), interval=0.02,
                        what='/readyz %s' % ('200' if ready else '503'))

    def stdout(self):
        try:
            with open(self.stdout_path, 'rb') as f:
                return f.read().decode(errors='replace')
        except OSError:
            return ''

    def stderr(self):
        try:
            with open(self.stderr_path, 'rb') as f:
                return f.read().decode(errors='replace')
        except OSError:
            return ''

    def logs(self):
        """The JSON log records written so far (a partial last line is skipped)."""
        out = []
        for line in self.stdout().split('\n'):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def sanitizer_report(self):
        err = self.stderr() + self.stdout()
        for m in SANITIZER_MARKERS:
            if m in err:
                i = err.index(m)
                return err[max(0, i - 200):i + 4000]
        return None

    def _close_files(self):
        for f in (getattr(self, '_out', None), getattr(self, '_err', None)):
            if f:
                f.close()
        self._out = self._err = None

    def _reap(self):
        if self.proc is not None and self.proc.poll() is not None:
            self.returncode = self.proc.returncode
            if self in _live:
                _live.remove(self)
            self._close_files()

    def wait(self, timeout):
        """Waits for the process to exit; returns its exit code, or None past the deadline."""
        if self.proc is None:
            return self.returncode
        rc = _wait_pid(self.proc, timeout)
        if rc is not None:
            self._reap()
        return rc

    def send_signal(self, sig):
        os.kill(self.proc.pid, sig)

    def stop(self, timeout=None, sig=signal.SIGTERM):
        """Sends SIGTERM (or sig) by PID and returns the exit code; SIGKILL past the deadline
        (then the code is negative)."""
        if self.proc is None or self.proc.poll() is not None:
            self._reap()
            return self.returncode
        timeout = timeout or scaled(20)
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        rc = self.wait(timeout)
        if rc is None:
            self._force_kill()
        return self.returncode

    def _force_kill(self):
        if self.proc is None:
            return
        _kill_now(self.proc)
        self._reap()

    def kill(self):
        """SIGKILL by PID (the exit code is then not held against the test)."""
        self.killed = True
        self._force_kill()
        return self.returncode

    def request(self, method, path, body=None, headers=None, timeout=10):
        return request(self.port, method, path, body=body, headers=headers, timeout=timeout)

    def raw(self, timeout=10):
        return RawConn(self.port, timeout=timeout)


def proc_state(pid):
    """The one-letter state of a process ('T': stopped)."""
    with open('/proc/%d/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()[0]


def one_turn(svc, redis, calls, before_continue=None):
    """Puts requests in one loop turn of entityd for certain: writes each (method, path, body:
    a dict sent as JSON, or None) on its own warm keep-alive connection while the process is
    stopped (SIGSTOP), then continues it (SIGCONT): one poll then reads them all. Resets
    Redis's command statistics first; before_continue(conns) runs while it is still stopped.
    Returns the connections, in the order of calls."""
    conns = []
    for _ in calls:
        c = RawConn(svc.port, timeout=scaled(15))
        c.send(http_request_bytes('GET', '/healthz'))
        if c.read_response().status not in (200, 503):
            raise AssertionError('healthz before the turn')
        conns.append(c)
    redis.cli('CONFIG', 'RESETSTAT')
    svc.send_signal(signal.SIGSTOP)
    # The stop takes effect when the process next leaves the kernel: until it shows as
    # stopped, a request written now could still be read alone, a turn before the others.
    wait_for(lambda: proc_state(svc.pid) == 'T', scaled(5), what='entityd stopped')
    try:
        for c, (method, path, body) in zip(conns, calls):
            if body is None:
                c.send(http_request_bytes(method, path))
            else:
                c.send(http_request_bytes(method, path, {'Content-Type': 'application/json'},
                                          json.dumps(body)))
        time.sleep(0.2)  # every request is in its socket's buffer
        if before_continue:
            before_continue(conns)
    finally:
        svc.send_signal(signal.SIGCONT)
    return conns
