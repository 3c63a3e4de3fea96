"""The unittest base class that stops what a test started and checks sanitizer reports, and
the runner that prints 'N passed, N failed[, N skipped]' last."""

import sys
import time
import unittest

from . import base
from .base import ENTITYD_INSTANCES, SANITIZED
from .procs import Entityd, Redis
from .web import Response


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
    if not result.wasSuccessful():
        base.keep_tmp()  # the logs of every process, for the failure's diagnosis
        print('process logs kept in %s' % base.TMP_ROOT)
    base.cleanup()
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
