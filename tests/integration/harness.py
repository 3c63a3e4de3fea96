"""Integration-test harness: real redis-server and entityd processes on loopback, stdlib only.

Every process started here is registered and stopped by its PID (tearDown, tearDownClass, or
atexit as a last resort). Every wait loop is bounded by a deadline. Test files are unittest
modules ending with::

    if __name__ == '__main__':
        harness.main()

It prints the plain summary line 'N passed, N failed[, N skipped]' last and exits non-zero on
a failure. Arguments select tests: python3 test_http.py HttpTest.test_uri_too_long

Environment: ENTITYD_BIN, ENTITYD_SIGN_BIN (default build/service/... relative to the repo),
ENTITYD_FIXTURES, and ASAN_OPTIONS / UBSAN_OPTIONS, which are passed through to the service.
ENTITYD_TEST_SLOW (a number) multiplies the generous deadlines; it defaults to 3 for a
sanitizer build (detected from the binary) and 1 otherwise. ENTITYD_TEST_KEEP_TMP=1 keeps the
temporary directory (logs of every process) after the run; it is kept anyway when a test
fails.

Overview:
  Redis(port=None, appendonly=False, appendfsync=None, password=None)
      .url .port .pid .cli(*args) .kill() .stop() .restart() .pause() .resume()
  Entityd(redis=None, env={...}, secret=TEST_SECRET, wait_ready=True)
      .port .pid .request(method, path, body, headers) .raw() .logs() .stdout() .stderr()
      .stop(sig=SIGTERM) -> exit code  .kill()  .wait(timeout)  .send_signal(sig)  .ready()
  request(port, method, path, body=None, headers=None) -> (status, headers, JSON or bytes)
  Client(port): keep-alive requests; RawConn(port): send bytes, read_response(),
      read_available(), wait_closed(); http_request_bytes(), chunked()
  Wallet.random(n) / Wallet.from_key(hex): .address .sign(message, compact, v01)
      -> (address, signature); auth_query(address, signature); current_message(port)
  signin_message(), iso_ms(), eip55(), keccak256(), to_compact(), to_v01(), high_s()
  ServiceTestCase: self.redis(), self.entityd() (stopped after the test, which fails unless
      the exit code is 0), class_redis()/class_entityd() for setUpClass, sanitizer reports
      checked after every test, assertEnvelope(resp, status, code, field), assertOk(resp).
"""

import atexit
import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bin(env_name, rel):
    p = os.environ.get(env_name) or os.path.join(REPO, rel)
    return os.path.abspath(p)


ENTITYD_BIN = _bin('ENTITYD_BIN', 'build/service/entityd')
ENTITYD_SIGN_BIN = _bin('ENTITYD_SIGN_BIN', 'build/service/tools/entityd-sign')
FIXTURES = os.environ.get('ENTITYD_FIXTURES') or os.path.join(REPO, 'tests', 'fixtures')
REDIS_SERVER = shutil.which('redis-server') or '/usr/bin/redis-server'

TEST_SECRET = 'integration-test-secret-0123456789abcdef'

# Settings of the service that a caller's environment must not leak into a test instance.
SERVICE_ENV_KEYS = (
    'PORT', 'HOST', 'REDIS_URL', 'REDIS_TIMEOUT_MS', 'AUTH_SECRET', 'AUTH_DOMAIN',
    'AUTH_EPOCH_SECONDS', 'PLATFORM_ADMINS', 'ENTITY_CREATION', 'MAX_BODY_BYTES', 'LOG_LEVEL',
    'MAX_CONNECTIONS', 'HEADER_TIMEOUT_MS', 'IDLE_TIMEOUT_MS', 'SHUTDOWN_TIMEOUT_MS',
    'SIG_CACHE_SIZE', 'DEV', 'WRITE_TIMEOUT_MS', 'WRITE_BUFFER_BYTES', 'REDIS_MAX_PENDING',
    'LOG_BUFFER_BYTES', 'PAGE_CACHE_SIZE', 'READ_CACHE_MB', 'EVENTS_MAX', 'EVENTS_MAX_BYTES',
    'SKILLTREE_MAX_BYTES',
    'RATE_WRITES_PER_MINUTE', 'ENTITY_CREATE_PER_DAY', 'CORS_ORIGINS',
    'MAX_MEMBERS_PER_ENTITY', 'MAX_ADMINS_PER_ENTITY', 'MAX_SKILLS_PER_ENTITY',
    'FIND_REPAIR_GRACE_MS', 'FIND_BACKFILL_BATCH', 'SWEEP_STEP_ENTRIES', 'SWEEP_PAUSE_MS',
    'SWEEP_POLL_MS', 'SWEEP_PAUSED',
    'MAX_LEVELS_PER_ENTITY', 'CONTRIBUTIONS_PER_MEMBER_PER_MINUTE',
    'LOG_BUFFER_BYTES', 'PAGE_CACHE_SIZE', 'READ_CACHE_MB', 'EVENTS_MAX', 'WORKERS',
    'REDIS_CLUSTER_NODES', 'REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_SENTINELS',
    'REDIS_SENTINEL_MASTER',
    'ATTESTATION_KEY_FILE', 'ATTESTATION_CHAIN_ID', 'ATTESTATION_EAS_ADDRESS',
    'ATTESTATION_EAS_VERSION', 'ATTESTATION_CACHE_SIZE',
    'AUTH_URI', 'AUTH_CHAIN_ID', 'ETH_RPC_URL', 'ETH_RPC_TIMEOUT_MS', 'ETH_RPC_MAX_INFLIGHT',
    'ETH_RPC_CODE_TTL_SECONDS', 'ETH_RPC_MAX_PER_SECOND',
)
# ENTITYD_TEST_WORKERS=N runs every instance with WORKERS=N unless its test sets WORKERS.
TEST_WORKERS = os.environ.get('ENTITYD_TEST_WORKERS')

# The suites write far more from one address than a wallet may (120 writes a minute, 20
# creations a day by default) and award one member more than 600 contributions a minute: these
# rate limits are off unless a test turns them on (test_limits.py does, with the defaults). The
# entity-size limits (MAX_*_PER_ENTITY) keep their defaults.
LIMITS_OFF = {'RATE_WRITES_PER_MINUTE': '0', 'ENTITY_CREATE_PER_DAY': '0',
              'CONTRIBUTIONS_PER_MEMBER_PER_MINUTE': '0',
              # The erasure's idle look at the erasures set (once a second by default) would
              # show in the suites that count the commands a request sends; an instance still
              # erases what it deletes itself at once. test_erase.py sets its own.
              'ERASE_POLL_MS': '3600000',
              # The same for the sweeper's idle look at the sweeps set: an instance still sweeps
              # what it removes itself (a removal kicks it). test_sweep.py sets its own.
              'SWEEP_POLL_MS': '3600000'}

SANITIZER_MARKERS = ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:',
                     'ERROR: ThreadSanitizer', 'ERROR: UndefinedBehaviorSanitizer')


def _is_sanitized(path):
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError:
        return False
    return b'__asan_init' in data or b'__ubsan_handle' in data


SANITIZED = _is_sanitized(ENTITYD_BIN)
SLOW = float(os.environ.get('ENTITYD_TEST_SLOW') or (3 if SANITIZED else 1))


def scaled(seconds):
    """A deadline stretched for slow (sanitizer) builds."""
    return seconds * SLOW


# How much earlier than its nominal length a deadline of the service may end, measured on this
# process's clock: the service counts whole milliseconds of CLOCK_MONOTONIC (libuv may take
# the coarse variant, a scheduler tick behind). A lower bound measured from a client event
# that comes before the one the service keys on needs this and no more (docs/TIMING.md).
CLOCK_TOLERANCE = 0.01


# --------------------------------------------------------------------------------------------
# process registry and cleanup

_TMP_ROOT = tempfile.mkdtemp(prefix='entityd-it-')
_live = []          # objects with _force_kill(), not yet reaped
ENTITYD_INSTANCES = []  # every Entityd started in this process, for log scans
ISSUED_SIGNATURES = set()  # every signature produced by Wallet.sign, lowercase hex without 0x


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=_TMP_ROOT)


_keep_tmp = bool(os.environ.get('ENTITYD_TEST_KEEP_TMP'))


def _cleanup():
    for obj in list(_live):
        try:
            obj._force_kill()
        except Exception:
            pass
    if not _keep_tmp:
        shutil.rmtree(_TMP_ROOT, ignore_errors=True)


atexit.register(_cleanup)


class AbortWait(Exception):
    """Raised by a wait_for predicate to stop waiting at once (e.g. the process died)."""


def wait_for(pred, timeout, interval=0.02, what='condition'):
    """Polls pred() until it returns a truthy value (returned) or raises TimeoutError.
    Exceptions from pred are retried, except AbortWait, which propagates."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except AbortWait:
            raise
        except Exception as e:  # noqa: BLE001 - the predicate may fail while things start
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError('timed out after %.1fs waiting for %s%s' %
                               (timeout, what, (': %r' % last_exc) if last_exc else ''))
        time.sleep(interval)


def commandstats(info):
    """{command: calls} from the text of a Redis INFO commandstats."""
    out = {}
    for line in info.splitlines():
        m = re.match(r'^cmdstat_([^:]+):calls=(\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def wait_still(look, changed, what):
    """Until two looks 0.2 s apart (look() a reading of Redis's counters) show no change
    (changed(before, after) false): the work a write sends beside its answer (CONTRACT
    section 9: index writes, drops) has landed and will not count in what comes next."""
    looks = []

    def settled():
        looks.append(look())
        return len(looks) > 1 and not changed(looks[-2], looks[-1])
    wait_for(settled, scaled(10), interval=0.2, what=what)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def port_open(port, host='127.0.0.1'):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_pid(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise RuntimeError('no VmRSS for pid %d' % pid)


# --------------------------------------------------------------------------------------------
# RESP client

class RespError(Exception):
    pass


def _resp_encode(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


class _RespReader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b''

    def _line(self):
        while b'\r\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b'+':
            return rest.decode()
        if t == b'-':
            raise RespError(rest.decode())
        if t == b':':
            return int(rest)
        if t == b'$':
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b'*':
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError('unexpected reply %r' % line)


def resp_command(port, *args, timeout=5.0, host='127.0.0.1', password=None):
    """One command over a fresh connection; returns the decoded reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        r = _RespReader(s)
        if password:
            s.sendall(_resp_encode(['AUTH', password]))
            r.read()
        s.sendall(_resp_encode(list(args)))
        return r.read()


# --------------------------------------------------------------------------------------------
# redis-server

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
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _wait_pid(self.proc, 10)
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
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _wait_pid(self.proc, 10)
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


# --------------------------------------------------------------------------------------------
# HTTP

def _decode_body(headers, data):
    ctype = headers.get('content-type', '')
    if ctype.startswith('application/json'):
        try:
            return json.loads(data.decode('utf-8'))
        except ValueError:
            return data
    return data


def request(port, method, path, body=None, headers=None, timeout=10, host='127.0.0.1'):
    """One request on a fresh connection: (status, lower-case headers dict, JSON or bytes).

    body: dict/list (sent as JSON with Content-Type application/json), str or bytes."""
    hdrs = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        if not any(k.lower() == 'content-type' for k in hdrs):
            hdrs['Content-Type'] = 'application/json'
    elif isinstance(body, str):
        body = body.encode()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        h = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, h, _decode_body(h, data)
    finally:
        conn.close()


class Client:
    """A keep-alive http.client connection: several requests on one socket."""

    def __init__(self, port, timeout=10, host='127.0.0.1'):
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.conn.connect()
        self.first_sock = self.conn.sock

    def request(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault('Content-Type', 'application/json')
        self.conn.request(method, path, body=body, headers=hdrs)
        resp = self.conn.getresponse()
        data = resp.read()
        h = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, h, _decode_body(h, data)

    def same_socket(self):
        return self.conn.sock is not None and self.conn.sock is self.first_sock

    def close(self):
        self.conn.close()


class Response:
    def __init__(self, status, reason, header_list, body):
        self.status = status
        self.reason = reason
        self.header_list = header_list
        self.headers = {}
        for k, v in header_list:
            self.headers[k.lower()] = v
        self.body = body
        self.json = _decode_body(self.headers, body) if body else None

    def __repr__(self):
        return '<Response %d %r %r>' % (self.status, self.headers, self.body[:300])


class RawConn:
    """A raw TCP connection for pipelining, partial sends and observing closes."""

    def __init__(self, port, timeout=10, host='127.0.0.1', rcvbuf=None):
        if rcvbuf:  # set before connect, so the advertised window is small from the start
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b''
        self.eof = False

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout('deadline passed')
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b''
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_response(self, timeout=None):
        """Reads one response (an interim 1xx has no body). Raises ConnectionError on EOF."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b'\r\n\r\n' not in self.buf:
            if self.eof or not self._fill(deadline):
                raise ConnectionError('connection closed before a response; got %r' % self.buf)
        head, rest = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        parts = lines[0].split(' ', 2)
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ''
        hl = []
        for line in lines[1:]:
            k, _, v = line.partition(':')
            hl.append((k.strip(), v.strip()))
        hd = {k.lower(): v for k, v in hl}
        n = 0 if 100 <= status < 200 else int(hd.get('content-length', '0'))
        while len(rest) < n:
            self.buf = head + b'\r\n\r\n' + rest
            if self.eof or not self._fill(deadline):
                raise ConnectionError('connection closed in a response body')
            head, rest = self.buf.split(b'\r\n\r\n', 1)
        body, self.buf = rest[:n], rest[n:]
        return Response(status, reason, hl, body)

    def read_available(self, wait=0.2):
        """Whatever arrives within wait seconds (b'' if nothing)."""
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline and not self.eof:
                self._fill(deadline)
        except (socket.timeout, TimeoutError):
            pass
        data, self.buf = self.buf, b''
        return data

    def wait_closed(self, timeout):
        """Seconds until the peer closed (EOF or reset), or None if still open at the deadline.
        Bytes received meanwhile are kept in self.buf."""
        start = time.monotonic()
        deadline = start + timeout
        while not self.eof:
            try:
                self._fill(deadline)
            except (socket.timeout, TimeoutError):
                return None
            except OSError:
                self.eof = True
        return time.monotonic() - start

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def http_request_bytes(method, path, headers=None, body=b'', host='127.0.0.1'):
    """Serializes one HTTP/1.1 request (Content-Length added when a body is given)."""
    if isinstance(body, str):
        body = body.encode()
    h = [('Host', host)]
    for k, v in (headers or {}).items() if isinstance(headers, dict) else (headers or []):
        h.append((k, v))
    if body and not any(k.lower() in ('content-length', 'transfer-encoding') for k, _ in h):
        h.append(('Content-Length', str(len(body))))
    head = '%s %s HTTP/1.1\r\n' % (method, path) + ''.join('%s: %s\r\n' % kv for kv in h)
    return head.encode('latin-1') + b'\r\n' + body


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


def read_answers(conns):
    """Reads one answer from each connection and closes it: [(status, JSON body)]."""
    out = []
    for c in conns:
        resp = c.read_response()
        out.append((resp.status, json.loads(resp.body)))
        c.close()
    return out


def chunked(body, sizes):
    """body in chunked transfer coding, cut into the given sizes (the rest as one chunk)."""
    if isinstance(body, str):
        body = body.encode()
    out, i = [], 0
    for n in sizes:
        if i >= len(body):
            break
        part = body[i:i + n]
        out.append(b'%x\r\n%s\r\n' % (len(part), part))
        i += n
    if i < len(body):
        out.append(b'%x\r\n%s\r\n' % (len(body) - i, body[i:]))
    out.append(b'0\r\n\r\n')
    return b''.join(out)


# --------------------------------------------------------------------------------------------
# Keccak-256 (for EIP-55 checksums), independent of the service's C implementation

_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]
_ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61], [28, 55, 25, 21, 56],
        [27, 20, 39, 8, 14]]
_M64 = (1 << 64) - 1


def _rol(x, n):
    return ((x << n) | (x >> (64 - n))) & _M64 if n else x


def _keccak_f(a):
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [[a[x][y] ^ d[x] for y in range(5)] for x in range(5)]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        a = [[b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y]) for y in range(5)]
             for x in range(5)]
        a[0][0] ^= rc
    return a


def keccak256(data):
    rate = 136
    msg = bytearray(data) + b'\x01'
    while len(msg) % rate:
        msg += b'\x00'
    msg[-1] |= 0x80
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            x, y = i % 5, i // 5
            a[x][y] ^= int.from_bytes(block[8 * i:8 * i + 8], 'little')
        a = _keccak_f(a)
    out = b''
    for i in range(4):
        out += a[i % 5][i // 5].to_bytes(8, 'little')
    return out


def eip55(address):
    """The EIP-55 checksummed spelling of a 0x address."""
    h = address.lower()[2:]
    digest = keccak256(h.encode()).hex()
    return '0x' + ''.join(ch.upper() if ch.isalpha() and int(digest[i], 16) >= 8 else ch
                          for i, ch in enumerate(h))


# --------------------------------------------------------------------------------------------
# wallets and the sign-in message

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _run_sign(args, key=None, stdin=None, timeout=30):
    env = dict(os.environ)
    env.pop('ENTITYD_SIGN_KEY', None)
    if key is not None:
        env['ENTITYD_SIGN_KEY'] = key
    p = subprocess.run([ENTITYD_SIGN_BIN] + args, input=stdin, env=env, capture_output=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError('entityd-sign %s failed (%d): %s' %
                           (' '.join(args), p.returncode, p.stderr.decode(errors='replace')))
    return p.stdout.decode()


def _parse_sign_line(line):
    fields = dict(kv.split('=', 1) for kv in line.strip().split('&'))
    return fields['address'], fields['signature']


class Wallet:
    """A private key (hex) and its lowercase address; signs through entityd-sign."""

    def __init__(self, key, address=None):
        self.key = key if key.startswith('0x') else '0x' + key
        self.address = address or _run_sign(['--address-only'], key=self.key).strip()

    @classmethod
    def from_key(cls, key):
        return cls(key)

    @classmethod
    def random(cls, n):
        """n fresh wallets from one entityd-sign --random N --keys-out F run."""
        d = tmpdir('keys-')
        path = os.path.join(d, 'keys')
        out = _run_sign(['--random', str(n), '--keys-out', path, '--address-only'])
        addrs = [l.strip() for l in out.splitlines() if l.strip()]
        with open(path) as f:
            keys = [l.strip() for l in f if l.strip() and not l.startswith('#')]
        assert len(keys) == n and len(addrs) == n, (keys, addrs)
        return [cls(k, a) for k, a in zip(keys, addrs)]

    def sign(self, message, compact=False, v01=False):
        """(address, signature) for message (str or bytes), as personal_sign would give."""
        if isinstance(message, str):
            message = message.encode()
        args = ['--message', '-']
        if compact:
            args.append('--compact')
        if v01:
            args.append('--v01')
        address, sig = _parse_sign_line(_run_sign(args, key=self.key, stdin=message))
        assert address == self.address, (address, self.address)
        ISSUED_SIGNATURES.add(sig.lower()[2:])
        return address, sig

    def sign_url(self, port, compact=False, v01=False):
        """Signs the service's current message fetched by entityd-sign --url itself."""
        args = ['--url', 'http://127.0.0.1:%d' % port]
        if compact:
            args.append('--compact')
        if v01:
            args.append('--v01')
        address, sig = _parse_sign_line(_run_sign(args, key=self.key))
        ISSUED_SIGNATURES.add(sig.lower()[2:])
        return address, sig

    def query(self, message, address=None, **kw):
        """'address=..&signature=..' for message (address overridable)."""
        a, s = self.sign(message, **kw)
        return auth_query(address or a, s)


def auth_query(address=None, signature=None, **extra):
    parts = []
    if address is not None:
        parts.append('address=' + address)
    if signature is not None:
        parts.append('signature=' + signature)
    for k, v in extra.items():
        parts.append('%s=%s' % (k, v))
    return '&'.join(parts)


def split_signature(sig):
    """(r, s, v) integers of a 65-byte 0x signature."""
    h = sig[2:] if sig.startswith('0x') else sig
    assert len(h) == 130, sig
    return int(h[:64], 16), int(h[64:128], 16), int(h[128:], 16)


def join_signature(r, s, v):
    return '0x%064x%064x%02x' % (r, s, v)


def to_compact(sig):
    """EIP-2098: r || (s with the y-parity in its top bit)."""
    r, s, v = split_signature(sig)
    parity = v - 27 if v >= 27 else v
    return '0x%064x%064x' % (r, s | (parity << 255))


def to_v01(sig):
    r, s, v = split_signature(sig)
    return join_signature(r, s, v - 27 if v >= 27 else v)


def high_s(sig):
    """The same signature in its high-s form (n - s, parity flipped): rejected by EIP-2."""
    r, s, v = split_signature(sig)
    flipped = {27: 28, 28: 27, 0: 1, 1: 0}[v]
    return join_signature(r, SECP256K1_N - s, flipped)


def iso_ms(unix_ms):
    dt = datetime.datetime.fromtimestamp(unix_ms / 1000, tz=datetime.timezone.utc)
    return dt.strftime('%Y-%m-%dT%H:%M:%S.') + '%03dZ' % (unix_ms % 1000)


def signin_nonce(secret, epoch):
    return hmac.new(secret.encode(), ('epoch:%d' % epoch).encode(),
                    hashlib.sha256).digest()[:16].hex()


def signin_message(secret, domain, epoch_seconds, epoch):
    """The CONTRACT section 2 message, computed independently of the service."""
    return '\n'.join([
        'Sign in to %s' % domain,
        '',
        'Sign this message to prove you own this wallet. It costs no gas.',
        '',
        'Epoch: %d' % epoch,
        'Nonce: %s' % signin_nonce(secret, epoch),
        'Issued At: %s' % iso_ms(epoch * epoch_seconds * 1000),
        'Expiration Time: %s' % iso_ms((epoch + 2) * epoch_seconds * 1000),
    ])


def current_message(port):
    """(message text, epoch) from GET /api/auth/message."""
    st, _, body = request(port, 'GET', '/api/auth/message')
    assert st == 200, (st, body)
    return body['data']['message'], body['data']['epoch']


# --------------------------------------------------------------------------------------------
# test base class and runner

class Signer:
    """Signs each wallet's sign-in message once (signing is slow) and gives the address and
    signature query of a wallet."""

    def __init__(self, message):
        self.message = message
        self.creds = {}

    def query(self, w):
        c = self.creds.get(w.address)
        if c is None:
            c = self.creds[w.address] = w.sign(self.message)
        return auth_query(*c)


class ServiceTestCase(unittest.TestCase):
    """Checks every entityd started in this process for sanitizer reports after each test, and
    stops the instances a test started (self.entityd(...)) expecting a clean exit 0."""

    _class_instances = None
    _class_redis = None

    @classmethod
    def class_redis(cls, **kw):
        r = Redis(**kw)
        cls._class_redis = (cls._class_redis or []) + [r]
        return r

    @classmethod
    def class_entityd(cls, *a, **kw):
        e = Entityd(*a, **kw)
        cls._class_instances = (cls._class_instances or []) + [e]
        return e

    @classmethod
    def tearDownClass(cls):
        problems = []
        for e in cls._class_instances or []:
            if e.alive():
                rc = e.stop()
                if rc != 0:
                    problems.append('entityd (port %s) exited %s on SIGTERM:\n%s' %
                                    (e.port, rc, e.stderr()[-3000:]))
            rep = e.sanitizer_report()
            if rep:
                problems.append('sanitizer report from entityd (port %s):\n%s' % (e.port, rep))
        for r in cls._class_redis or []:
            r.kill()
        cls._class_instances = None
        cls._class_redis = None
        if problems:
            raise AssertionError('\n'.join(problems))

    def setUp(self):
        self._instances = []

    def redis(self, **kw):
        r = Redis(**kw)
        self.addCleanup(r.kill)
        return r

    def entityd(self, *a, **kw):
        e = Entityd(*a, **kw)
        self._instances.append(e)
        return e

    def tearDown(self):
        problems = []
        for e in self._instances:
            if e.alive():
                rc = e.stop()
                if rc != 0:
                    problems.append('entityd (port %s) exited %s on SIGTERM:\n%s' %
                                    (e.port, rc, e.stderr()[-3000:]))
            elif e.returncode not in (0, None) and not e.killed:
                problems.append('entityd (port %s) exited %s during the test:\n%s' %
                                (e.port, e.returncode, e.stderr()[-3000:]))
        for e in ENTITYD_INSTANCES:
            rep = e.sanitizer_report()
            if rep and not getattr(e, '_reported', False):
                e._reported = True
                problems.append('sanitizer report from entityd (port %s):\n%s' % (e.port, rep))
        if problems:
            self.fail('\n'.join(problems))

    # --- assertions shared by the API tests ---

    def assertEnvelope(self, resp, status, code, field=None, message_contains=None):
        """resp: (status, headers, body) or Response. The CONTRACT section 1 error envelope."""
        st, headers, body = _triple(resp)
        self.assertEqual(st, status, 'status %s, body %r' % (st, body))
        self.assertTrue(headers.get('content-type', '').startswith('application/json'),
                        headers)
        self.assertIn('x-request-id', headers)
        self.assertIsInstance(body, dict, 'body is not JSON: %r' % (body,))
        self.assertIs(body.get('success'), False, body)
        err = body.get('error')
        self.assertIsInstance(err, dict, body)
        self.assertEqual(err.get('code'), code, body)
        self.assertIsInstance(err.get('message'), str, body)
        self.assertTrue(err['message'], body)
        if field is None:
            self.assertNotIn('field', err, body)
        else:
            self.assertEqual(err.get('field'), field, body)
        if message_contains:
            self.assertIn(message_contains.lower(), err['message'].lower(), body)
        if status == 503:
            self.assertEqual(headers.get('retry-after'), '1', headers)
        return err

    def assertOk(self, resp, status=200):
        st, headers, body = _triple(resp)
        self.assertEqual(st, status, 'status %s, body %r' % (st, body))
        self.assertIsInstance(body, dict, body)
        self.assertIs(body.get('success'), True, body)
        return body


def _triple(resp):
    if isinstance(resp, Response):
        return resp.status, resp.headers, resp.json if resp.json is not None else resp.body
    return resp


class _CountingResult(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = 0
        self.passed_ids = set()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        self.passed_ids.add(test.id())


def main():
    """Runs the calling module's tests; last line 'N passed, N failed[, N skipped]'."""
    argv = sys.argv[1:]
    loader = unittest.TestLoader()
    module = sys.modules['__main__']
    if argv:
        suite = loader.loadTestsFromNames(argv, module)
    else:
        suite = loader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=_CountingResult)
    t0 = time.monotonic()
    result = runner.run(suite)
    global _keep_tmp
    if not result.wasSuccessful():
        _keep_tmp = True  # the logs of every process, for the failure's diagnosis
        print('process logs kept in %s' % _TMP_ROOT)
    _cleanup()
    # A test that fails in its body and again in tearDown counts once.
    failed_ids = {t.id() for t, _ in result.failures + result.errors}
    failed_ids |= {t.id() for t in result.unexpectedSuccesses}
    failed = len(failed_ids)
    passed = max(0, result.passed - len([1 for t in failed_ids if t in result.passed_ids]))
    skipped = len(result.skipped)
    sys.stderr.flush()
    line = '%d passed, %d failed' % (passed, failed)
    if skipped:
        line += ', %d skipped' % skipped
    print('(%.1fs%s)' % (time.monotonic() - t0, ', sanitizer build' if SANITIZED else ''))
    print(line)
    sys.stdout.flush()
    sys.exit(1 if failed else 0)


def metric(port, name):
    """A value from the service's /metrics: `name` a family (its samples of every label set
    summed) or one sample as printed (`family{label="value"}`); None when it has none."""
    st, _, body = request(port, 'GET', '/metrics', timeout=scaled(10))
    assert st == 200, st
    text = body if isinstance(body, str) else body.decode()
    total, seen = 0.0, False
    for line in text.splitlines():
        key, _, value = line.rpartition(' ')
        if key == name or (key.startswith(name + '{') and '{' not in name):
            total, seen = total + float(value), True
    return total if seen else None


def read_cache_metrics(port):
    """{name or name{labels}: value} of the entityd_read_cache_* samples."""
    st, _, body = request(port, 'GET', '/metrics')
    assert st == 200, st
    out = {}
    for line in body.decode().splitlines():
        if line.startswith('entityd_read_cache'):
            k, v = line.rsplit(' ', 1)
            out[k] = float(v)
    return out
