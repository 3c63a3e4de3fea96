"""What every part of the test support shares: the paths and environment of a run, the
slow-build scale of deadlines, the temporary directory and the registry of live processes
(stopped by PID at exit), bounded waits and free loopback ports."""

import atexit
import os
import shutil
import socket
import struct
import sys
import tempfile
import time



REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _bin(env_name, rel):
    p = os.environ.get(env_name) or os.path.join(REPO, rel)
    return os.path.abspath(p)


ENTITYD_BIN = _bin('ENTITYD_BIN', 'build/service/entityd')
ENTITYD_SIGN_BIN = _bin('ENTITYD_SIGN_BIN', 'build/service/tools/entityd-sign')
ENTITYD_JOINREAD_BIN = _bin('ENTITYD_JOINREAD_BIN', 'build/service/tools/entityd-joinread')
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
    'SWEEP_POLL_MS', 'SWEEP_PAUSED', 'BOARD_REBUILD_LEASE_MS', 'BOARD_REBUILD_STEP_ENTRIES',
    'BOARD_REBUILD_PAUSE_FACTOR',
    'MAX_LEVELS_PER_ENTITY', 'CONTRIBUTIONS_PER_MEMBER_PER_MINUTE',
    'LOG_BUFFER_BYTES', 'PAGE_CACHE_SIZE', 'READ_CACHE_MB', 'EVENTS_MAX', 'WORKERS',
    'REDIS_CLUSTER_NODES', 'REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_SENTINELS',
    'REDIS_SENTINEL_MASTER',
    'ATTESTATION_KEY_FILE', 'ATTESTATION_CHAIN_ID', 'ATTESTATION_EAS_ADDRESS',
    'ATTESTATION_EAS_VERSION', 'ATTESTATION_CACHE_SIZE',
    'AUTH_URI', 'AUTH_CHAIN_ID', 'ETH_RPC_URL', 'ETH_RPC_TIMEOUT_MS', 'ETH_RPC_MAX_INFLIGHT',
    'ETH_RPC_CODE_TTL_SECONDS', 'ETH_RPC_MAX_PER_SECOND',
    'ETH_RPC_URLS', 'MULTICALL3_ADDRESS', 'JOIN_RPC_MAX_PER_SECOND', 'JOIN_RECHECK_SECONDS',
    'JOIN_GRACE_SECONDS', 'JOIN_CHECK_CACHE_MS', 'JOIN_POLL_MS', 'JOIN_LEASE_MS',
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
              'SWEEP_POLL_MS': '3600000',
              # And for the webhook engine's pass over the endpoint lists (every 10 s while none
              # is listed): a new endpoint still kicks one. The webhook suites set their own.
              'WEBHOOK_POLL_MS': '60000', 'WEBHOOK_LEASE_MS': '600000',
              # And for the re-check's first look at the registry of join rule entities (a
              # minute after start by default); the join suites set short periods, which bound
              # it too.
              'JOIN_POLL_MS': '3600000'}

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

TMP_ROOT = tempfile.mkdtemp(prefix='entityd-it-')
_live = []          # objects with _force_kill(), not yet reaped
ENTITYD_INSTANCES = []  # every Entityd started in this process, for log scans
ISSUED_SIGNATURES = set()  # every signature produced by Wallet.sign, lowercase hex without 0x


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=TMP_ROOT)


_keep_tmp = bool(os.environ.get('ENTITYD_TEST_KEEP_TMP'))


def _collect_logs():
    """Copies every entityd's output into ENTITYD_TEST_LOG_DIR (when set), one file per stream,
    named so that test files running in parallel never collide: the run's log scan
    (logscan.py) reads them all after the suites."""
    dest = os.environ.get('ENTITYD_TEST_LOG_DIR')
    if not dest or not os.path.isdir(dest):
        return
    test = os.path.splitext(os.path.basename(sys.argv[0] or 'test'))[0]
    for i, e in enumerate(ENTITYD_INSTANCES):
        for stream in ('stdout', 'stderr'):
            src = getattr(e, stream + '_path', None)
            if src and os.path.exists(src):
                name = '%s-%d-%d.%s.log' % (test, os.getpid(), i, stream)
                try:
                    shutil.copyfile(src, os.path.join(dest, name))
                except OSError:
                    pass


def cleanup():
    for obj in list(_live):
        try:
            obj._force_kill()
        except Exception:
            pass
    _collect_logs()
    if not _keep_tmp:
        shutil.rmtree(TMP_ROOT, ignore_errors=True)


atexit.register(cleanup)


def keep_tmp():
    """Keeps the temporary directory (every process's logs) past the run."""
    global _keep_tmp
    _keep_tmp = True


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


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def reset_close(s):
    """Close with SO_LINGER 0: the kernel sends RST, dropping anything unsent or unread."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


def port_open(port, host='127.0.0.1'):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
