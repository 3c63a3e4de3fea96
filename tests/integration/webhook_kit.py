"""What the webhook delivery tests share: the Standard Webhooks receiver (tests/node/
webhook_receiver.cjs, a real HTTP server on loopback that verifies every delivery with the
`standardwebhooks` package), secrets, and the one fixture that makes an endpoint."""

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


def make_endpoint(redis, eid, url, created_by, events=(), secret=None, enabled=True):
    """An endpoint of entity eid as the CRUD routes leave it: (wid, secret). Written straight
    into Redis (keys.h) the way webhook_json renders it."""
    wid = 'wh-' + str(uuid.uuid4())
    secret = secret or new_secret()
    created = harness.iso_ms(int(time.time() * 1000))
    record = ('{"id":%s,"url":%s,"events":[%s],"description":"","enabled":%s,"createdAt":%s,'
              '"createdBy":%s,"disabledReason":null}') % (
        json.dumps(wid), json.dumps(url), ','.join(json.dumps(e) for e in events),
        'true' if enabled else 'false', json.dumps(created), json.dumps(created_by.lower()))
    redis.cli('ZADD', 'webhooks', '0', '%s:%s' % (eid, wid))
    redis.cli('HSET', 'ent:{%s}:webhooks' % eid, wid, record, 'sec:' + wid, secret)
    return wid, secret


def endpoint_record(redis, eid, wid):
    return json.loads(text(redis.cli('HGET', 'ent:{%s}:webhooks' % eid, wid)))


def enable(redis, eid, wid):
    """Enabled again, as an update with "enabled": true leaves it."""
    rec = endpoint_record(redis, eid, wid)
    record = ('{"id":%s,"url":%s,"events":%s,"description":%s,"enabled":true,"createdAt":%s,'
              '"createdBy":%s,"disabledReason":null}') % (
        json.dumps(rec['id']), json.dumps(rec['url']), json.dumps(rec['events']).replace(' ', ''),
        json.dumps(rec['description']), json.dumps(rec['createdAt']),
        json.dumps(rec['createdBy']))
    redis.cli('HSET', 'ent:{%s}:webhooks' % eid, wid, record)


def text(v):
    return v.decode() if isinstance(v, bytes) else v
