"""Integration-test harness: real redis-server and entityd processes on loopback, stdlib only.

The entry point of the test-support package support/ (one job a module: base, resp, procs,
web, wallets, metrics, faultproxy, chain, runner); every name a test uses is re-exported here, so
`import harness` and `from harness import ...` reach all of them.

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


import os
import sys
import unittest  # noqa: F401 - tests reach it as harness.unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support.base import (CLOCK_TOLERANCE, ENTITYD_BIN, ENTITYD_INSTANCES,  # noqa: E402,F401
                          ENTITYD_SIGN_BIN, FIXTURES, ISSUED_SIGNATURES, LIMITS_OFF, REDIS_SERVER,
                          REPO, SANITIZED, SANITIZER_MARKERS, SERVICE_ENV_KEYS, SLOW, TEST_SECRET,
                          TEST_WORKERS, AbortWait, free_port, port_open, scaled, tmpdir,
                          wait_for)
from support.faultproxy import FaultProxy  # noqa: E402,F401
from support.chain import (ETH_CALLS, JoinChain, JoinReader,  # noqa: E402,F401
                           chain_available, proxy_url)
from support.metrics import (commandstats, metric, metrics_text,  # noqa: E402,F401
                             read_cache_metrics, sample, wait_still)
from support.procs import (Entityd, Redis, one_turn, proc_state, rss_kib)  # noqa: E402,F401
from support.resp import RespError, resp_command  # noqa: E402,F401
from support.runner import ServiceTestCase, main  # noqa: E402,F401
from support.wallets import (SECP256K1_N, Signer, Wallet, _parse_sign_line,  # noqa: E402,F401
                             _run_sign, auth_query, current_message, eip55, fresh_address,
                             fresh_wallet, high_s, iso_ms, join_signature, keccak256,
                             personal_hash, probe_path, revoke_path, signin_message,
                             signin_nonce, split_signature, to_compact, to_v01)
from support.sessions import (make_session, new_token, session_key,  # noqa: E402,F401
                              token_parts)
from support.web import (Client, RawConn, Response, chunked,  # noqa: E402,F401
                         http_request_bytes, read_answers, request)
