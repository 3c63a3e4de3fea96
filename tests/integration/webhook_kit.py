"""What the webhook delivery tests share: the Standard Webhooks receiver (tests/node/
webhook_receiver.cjs, a real HTTP server on loopback that verifies every delivery with the
`standardwebhooks` package), secrets, and the fixtures that make an endpoint (through the API;
straight into Redis only for what the API refuses)."""

import base64
import json
import os
import secrets
import select
import shutil
import subprocess
import time
import urllib.request
import uuid

import harness

NODE_DIR = os.path.join(harness.REPO, 'tests', 'node')
NODE = shutil.which('node') or '/usr/bin/node'


def available():
    return os.path.isdir(os.path.join(NODE_DIR, 'node_modules', 'standardwebhooks')) and \
        os.path.exists(NODE)


def new_secret():
    return 'whsec_' + base64.b64encode(secrets.token_bytes(32)).decode()


class Receiver:
    """The node receiver, stopped by PID. port=None: a free one."""

    def __init__(self, port=None):
        self.proc = subprocess.Popen([NODE, os.path.join(NODE_DIR, 'webhook_receiver.cjs'),
                                      str(port or 0)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=NODE_DIR)
        deadline = time.monotonic() + harness.scaled(30)
        line = ''
        while time.monotonic() < deadline and not line:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    break
            elif self.proc.poll() is not None:
                break
        if not line:
            self.stop()
            raise RuntimeError('webhook_receiver.cjs did not start')
        self.port = json.loads(line)['port']

    def url(self, path):
        return 'http://127.0.0.1:%d%s' % (self.port, path)

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request('http://127.0.0.1:%d%s' % (self.port, path), data=data,
                                     method=method, headers={'content-type': 'application/json'})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b'null')

    def tell(self, path, secrets=None, script=None, default=None):
        body = {'path': path}
        if secrets is not None:
            body['secrets'] = secrets
        if script is not None:
            body['script'] = script
        if default is not None:
            body['default'] = default
        self._call('POST', '/_ctl', body)

    def got(self, path):
        return self._call('GET', '/_got?path=' + path)

    def wait_got(self, path, n, timeout, pred=None):
        """The requests to path once at least n of them (passing pred) arrived."""
        def enough():
            g = [x for x in self.got(path) if pred is None or pred(x)]
            return g if len(g) >= n else None
        return harness.wait_for(enough, timeout, interval=0.05,
                                what='%d deliveries to %s' % (n, path))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()


def make_endpoint(call, eid, url, events=()):
    """A new endpoint of entity eid made through the API (POST /api/entities/{id}/webhooks) by
    call(method, path, body) -> (status, headers, body): (wid, secret)."""
    st, _, b = call('POST', '/api/entities/%s/webhooks' % eid,
                    {'url': url, 'events': list(events), 'description': 'test receiver'})
    assert st == 201, (st, b)
    return b['data']['id'], b['data']['secret']


def write_endpoint(redis, eid, url, created_by):
    """An endpoint record written straight into Redis (keys.h) as webhook_json renders it, for
    what the API refuses to make: a URL the address guard refuses (the delivery must refuse it
    again at connect time). (wid, secret)."""
    wid = 'wh-' + str(uuid.uuid4())
    secret = new_secret()
    created = harness.iso_ms(int(time.time() * 1000))
    record = ('{"id":%s,"url":%s,"events":[],"description":"","enabled":true,"createdAt":%s,'
              '"createdBy":%s,"disabledReason":null}') % (
        json.dumps(wid), json.dumps(url), json.dumps(created), json.dumps(created_by.lower()))
    redis.cli('ZADD', 'webhooks', '0', '%s:%s' % (eid, wid))
    redis.cli('HSET', 'ent:{%s}:webhooks' % eid, wid, record, 'sec:' + wid, secret)
    return wid, secret


def endpoint_record(redis, eid, wid):
    return json.loads(text(redis.cli('HGET', 'ent:{%s}:webhooks' % eid, wid)))


def enable(call, eid, wid):
    """Enabled again through the API."""
    st, _, b = call('POST', '/api/entities/%s/webhooks/%s/update' % (eid, wid), {'enabled': True})
    assert st == 200 and b['data']['enabled'] is True, (st, b)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class InstancesCase(harness.ServiceTestCase):
    """Tests that start their own instances (kill, restart, settings per test) against one
    Redis per test and one receiver per class. start(**env) merges env over the class's ENV
    (a None value leaves the setting out) and signs self.q for the owner."""

    ENV = {}

    @classmethod
    def setUpClass(cls):
        cls.owner = harness.Wallet.random(1)[0]
        cls.rx = Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.rx.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.r = self.redis()

    def start(self, **env):
        e = dict(self.ENV)
        e.update(env)
        svc = self.entityd(redis=self.r, env={k: v for k, v in e.items() if v is not None})
        self.q = harness.Signer(harness.current_message(svc.port)[0]).query(self.owner)
        return svc

    def call(self, svc, method, path, body=None):
        path += ('&' if '?' in path else '?') + self.q
        return harness.request(svc.port, method, path, body=body, timeout=harness.scaled(20))

    def entity(self, svc):
        """A new public entity of the owner, made through svc: its id."""
        body = {'name': 'Guild ' + uuid.uuid4().hex[:6], 'description': '',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': True}
        return self.assertOk(self.call(svc, 'POST', '/api/entities', body), 201)['data']['id']
