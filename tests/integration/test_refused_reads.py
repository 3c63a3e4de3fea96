"""A refused read costs a refusal (CONTRACT section 12, "reads check rights first"): a stranger's
read of a private entity's events, skill tree or pages makes Redis answer no more than the role
lookups, however much lies behind them. Measured as Redis sees it, `total_net_output_bytes` of
INFO stats around each refused request (read on connections of the test's own, the INFO
reply's own bytes taken off by an empty measurement beside it). The service runs with its read
cache off, so that every read goes to Redis: the worst case, and the same on every run."""

import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import fresh_address  # noqa: E402
from test_attest import key_file, KEY  # noqa: E402

NINES = 9999999999999999
# What the role lookups and a refusal may cost Redis, in bytes of answer.
REFUSAL_BUDGET = 1000


def output_bytes(redis):
    info = redis.cli('INFO', 'stats')
    if isinstance(info, bytes):
        info = info.decode()
    for line in info.splitlines():
        if line.startswith('total_net_output_bytes:'):
            return int(line.split(':', 1)[1])
    raise AssertionError('no total_net_output_bytes in INFO stats')


class RefusedReadsTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        names = ['owner', 'member', 'stranger']
        cls.w = dict(zip(names, harness.Wallet.random(len(names))))
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'READ_CACHE_MB': '0', 'ATTESTATION_KEY_FILE': key_file('0x%s\n' % KEY)})
        cls.port = cls.svc.port
        msg, _ = harness.current_message(cls.port)
        cls.sig = {n: w.sign(msg)[1] for n, w in cls.w.items()}
        cls.eid = cls.build_private_entity()

    @classmethod
    def call(cls, who, method, path, body=None):
        path += ('&' if '?' in path else '?') + 'address=%s&signature=%s' % (
            cls.w[who].address, cls.sig[who])
        return harness.request(cls.port, method, path, body=body,
                               timeout=harness.scaled(60))

    @classmethod
    def must(cls, resp, statuses=(200, 201)):
        if resp[0] not in statuses:
            raise AssertionError('%s: %s' % (resp[0], resp[2]))
        return resp[2]

    @classmethod
    def build_private_entity(cls):
        """A private entity with much behind it: 30 force-adds of 1000 (events, members), a
        skill tree of about 1 MB, a board of 200, 100 contributions of one member."""
        body = {'name': 'Private guild', 'description': 'refused reads',
                'ownerAddresses': [cls.w['owner'].address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': False}
        eid = cls.must(cls.call('owner', 'POST', '/api/entities', body))['data']['id']
        member = cls.w['member'].address.lower()
        cls.must(cls.call('owner', 'POST', '/api/entities/%s/force-add' % eid,
                          {'addresses': [member], 'Chain': 'eth'}))
        members = [member]
        for _ in range(30):
            batch = [fresh_address() for _ in range(1000)]
            members += batch
            cls.must(cls.call('owner', 'POST', '/api/entities/%s/force-add' % eid,
                              {'addresses': batch, 'Chain': 'eth'}))
        for i in range(4):
            names = ['Skill %d-%d' % (i, j) for j in range(50)]
            cls.must(cls.call('owner', 'POST', '/api/skills/multiple',
                              {'names': names, 'descriptions': ['d' * 5000] * 50,
                               'entityID': eid}))
        # The board and the member's contributions, written in the shapes of keys.h as the
        # award script writes them (as test_progress_read seeds them).
        p = 'ent:{%s}' % eid
        args = []
        for i, addr in enumerate(members[:200]):
            args += ['0', '%016d:%s' % (NINES - (1000 + i), addr)]
        cls.r.cli('ZADD', p + ':lb:xp', *args)
        cls.r.cli('HSET', '%s:prog:%s' % (p, member), 'xp', '1199')
        for i in range(100):
            cid = 'k-' + str(uuid.uuid4())
            ms = 1700000000000 + i
            doc = {'id': cid, 'entityID': eid, 'member': member, 'skills': [], 'xp': 1,
                   'title': 't' * 1000, 'url': '', 'createdAt': harness.iso_ms(ms),
                   'createdBy': cls.w['owner'].address.lower(), 'revoked': False,
                   'revokedAt': None, 'revokedBy': None, 'reason': None}
            cls.r.cli('HSET', p + ':contribs', cid, json.dumps(doc, separators=(',', ':')))
            cls.r.cli('ZADD', '%s:contribs:of:%s' % (p, member), '0', '%016d:%s' % (ms, cid))
        return eid

    def redis_cost(self, who, path, status):
        """The least Redis output bytes of the read over three tries, each less the INFO
        reply's own bytes measured just before it."""
        best = None
        for _ in range(3):
            a = output_bytes(self.r)
            b = output_bytes(self.r)
            resp = self.call(who, 'GET', path)
            c = output_bytes(self.r)
            self.assertEqual(resp[0], status, '%s: %s' % (path, resp[2]))
            cost = (c - b) - (b - a)
            best = cost if best is None else min(best, cost)
        return best

    def paths(self):
        eid, m = self.eid, self.w['member'].address.lower()
        return {
            'events': '/api/entities/%s/events?limit=1000' % eid,
            'skills': '/api/skills?entityID=%s' % eid,
            'users': '/api/entities/%s/users?limit=1000' % eid,
            'leaderboard': '/api/entities/%s/leaderboard?limit=100' % eid,
            'contributions': '/api/entities/%s/members/%s/contributions?limit=100' % (eid, m),
            'progress': '/api/entities/%s/members/%s/progress' % (eid, m),
            'attestations': '/api/entities/%s/members/%s/attestations' % (eid, m),
            'entity': '/api/entities/%s' % eid,
            'admins': '/api/entities/%s/admins' % eid,
        }

    def test_refused_reads_cost_a_refusal(self):
        costs = {}
        for name, path in self.paths().items():
            costs[name] = self.redis_cost('stranger', path, 403)
        sys.stderr.write('refused-read Redis output bytes: %s\n' % json.dumps(costs))
        over = {n: c for n, c in costs.items() if c > REFUSAL_BUDGET}
        self.assertEqual(over, {}, 'refused reads over %d bytes of Redis answer: %s' %
                         (REFUSAL_BUDGET, costs))

    def test_allowed_reads_still_read(self):
        """The measure sees the data when the caller may read it: the owner's events and
        skill tree cost Redis their bytes, and each read is one answer."""
        events = self.redis_cost('owner', self.paths()['events'], 200)
        skills = self.redis_cost('owner', self.paths()['skills'], 200)
        sys.stderr.write('allowed-read Redis output bytes: events %d, skills %d\n' %
                         (events, skills))
        self.assertGreater(events, 100000)
        self.assertGreater(skills, 1000000)
        body = self.must(self.call('owner', 'GET', self.paths()['events']))
        self.assertGreaterEqual(len(body['data']), 31)
        body = self.must(self.call('member', 'GET', self.paths()['skills']))
        self.assertEqual(len(body['data']['skills']), 200)
        for name in ('users', 'leaderboard', 'contributions', 'progress'):
            self.must(self.call('member', 'GET', self.paths()[name]))
        board = self.must(self.call('member', 'GET', self.paths()['leaderboard']))
        self.assertEqual(len(board['data']), 100)

    def test_gate_runs_reads_only(self):
        """The gate runs the commands it is given only where they read: a write among them is
        answered with an error and changes nothing, even for the entity's owner."""
        path = os.path.join(harness.REPO, 'service', 'redis', 'lua', 'read_gate.lua')
        with open(path) as f:
            src = f.read()
        p = 'ent:{%s}' % self.eid
        victim = p + ':victim'
        self.r.cli('SET', victim, 'still here')
        owner = self.w['owner'].address.lower()
        with self.assertRaisesRegex(harness.RespError, 'not a read: DEL'):
            self.r.cli('EVAL', src, '5', p, p + ':owners', p + ':admins', p + ':members',
                       victim, 'r', owner, '0', '3', 'id', 'isEnabled', 'public', '2', 'DEL',
                       '5')
        self.assertEqual(self.r.cli('GET', victim), b'still here')

    def test_refusal_answers_unchanged(self):
        """Who is refused still learns only what the contract says: 403 for a stranger on a
        private entity, 404 for an unknown one."""
        unknown = 'c-' + str(uuid.uuid4())
        for path in ('/api/entities/%s/events' % unknown, '/api/skills?entityID=%s' % unknown,
                     '/api/entities/%s/leaderboard' % unknown):
            resp = self.call('stranger', 'GET', path)
            self.assertEqual(resp[0], 404, '%s: %s' % (path, resp[2]))
        resp = self.call('stranger', 'GET', self.paths()['events'])
        self.assertEqual(resp[2]['error']['code'], 'forbidden')


if __name__ == '__main__':
    harness.main()
