"""Entity lifecycles for scripts/chaos (CONTRACT section 8): each writing worker builds a
throwaway entity, tends it and deletes it, over and over, always under the same alias, while
the other workers' writes race the deletes.

A cycle (at most one a minute per worker), one request at a time, each sent again unchanged after a 503/504 until answered (an
answer after an unknown outcome may find the work done: 409, 404, missing, replayed):
create (alias free at once after the last delete: a first try's 409 is a violation), two
skills, three members (the member wallet among them), one award per member skill, a level
naming skill a, delete a refused (409 naming the level), rename b, delete the level, delete a,
its board gone (400 by), remove one member, the member wallet leaves, read __v, delete with
?v=, the entity 404.

Racing writes (Lifecycles.race): force-adds and awards to a throwaway live, being deleted or
deleted moments ago. Once a delete was answered, a write sent after it must be 404; while an
entity is live and no delete was sent, it must not be 404.

Lifecycles.check_end (after the load, before the invariants): every erasure ends, no key of a
deleted entity is left, no alias names one, and the owner's wallet list (CONTRACT section 9)
shows no deleted entity and every live one."""

import random
import threading
import time
import uuid

from clients import Case, error_envelope, ok_json

RACE_WINDOW_S = 5.0  # a deleted entity stays a race target this long after its delete
# A worker begins a cycle at most this often. Every erasure scans the node's whole keyspace,
# twice, one erasure at a time per instance: with 5 writing clients at 10 s, a 25-minute run
# deleted 889 entities and had erased 198 three minutes after its load (782,787 keys on the node;
# docs/OPERATIONS.md, deleting an entity). At 60 s the deletes stay within what one instance
# erases.
CYCLE_GAP_S = 60.0


def _field(resp):
    err = (resp.json() or {}).get('error') or {}
    return err.get('code'), err.get('field'), str(err.get('message', ''))


class Lifecycles:
    """The throwaway entities of every worker: id -> 'live', 'deleting' (a delete sent) or
    'deleted' (a delete answered), and when each was deleted."""

    def __init__(self, world):
        self.world = world
        self.lock = threading.Lock()
        self.state = {}
        self.deleted_at = {}
        self.figures = {'cycles': 0, 'steps': 0, 'races': 0, 'races_404': 0,
                        'retried_create_409': 0}

    def set(self, eid, st):
        with self.lock:
            self.state[eid] = st
            if st == 'deleted':
                self.deleted_at[eid] = time.monotonic()

    def get(self, eid):
        with self.lock:
            return self.state.get(eid)

    def count(self, name, n=1):
        with self.lock:
            self.figures[name] += n

    def target(self, rng):
        now = time.monotonic()
        with self.lock:
            ids = [e for e, st in self.state.items()
                   if st != 'deleted' or now - self.deleted_at[e] < RACE_WINDOW_S]
        return rng.choice(ids) if ids else None

    def cycle(self, worker, seed, gap_s=CYCLE_GAP_S):
        return Case('cycle', **Cycle(self, worker, random.Random(seed * 2), gap_s).case_args())

    def race(self, worker, seed):
        # Another stream than the cycle's: its addresses are not the cycle's members.
        return Case('race', **Race(self, worker, random.Random(seed * 2 + 1)).case_args())

    # ---- the end ----------------------------------------------------------------------------

    def check_end(self, r, request, timeout):
        """Problems (a list) once the erasures end; r: the Redis to ask, request(method, path)
        -> (status, body dict) over HTTP."""
        problems = []
        deadline = time.monotonic() + timeout
        # Redis may have been restarted by the last fault: the service reconnects first.
        probe = '/api/entities/%s?%s' % (self.world.eids[0], self.world.owner_auth)
        while request('GET', probe)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.25)
        while r.cli('ZCARD', 'erasures') and time.monotonic() < deadline:
            time.sleep(0.25)
        left = r.cli('ZRANGE', 'erasures', 0, -1) or []
        if left:
            problems.append('erasures not finished after %.0f s: %r' % (timeout, left[:5]))
        with self.lock:
            deleted = sorted(e for e, st in self.state.items() if st == 'deleted')
            live = sorted(e for e, st in self.state.items() if st == 'live')
        tags = {}
        for k in r.cli('KEYS', 'ent:{*', timeout=60) or []:
            tags.setdefault(k.decode()[5:].partition('}')[0], []).append(k.decode())
        for eid in deleted:
            if eid in tags and not left:
                problems.append('deleted %s: keys left %r' % (eid, tags[eid][:5]))
        for k in r.cli('KEYS', 'alias:{cyc-*') or []:
            holder = (r.cli('GET', k) or b'').decode().split(' ')[0]
            if holder in deleted:
                problems.append('%s still names the deleted %s' % (k.decode(), holder))
        owner = self.world.owner.address.lower()
        listed, cursor = set(), None
        for _ in range(1000):
            # limit 20: a page of 100 needs about 480 commands at once, past chaos's
            # REDIS_MAX_PENDING (docs/OPERATIONS.md, load shedding).
            path = '/api/wallets/%s/entities?role=owner&limit=20%s&%s' % (
                owner, '&cursor=' + cursor if cursor else '', self.world.owner_auth)
            st, b = request('GET', path)
            for _ in range(120):  # the store may still be reconnecting: 30 s at most
                if st != 503:
                    break
                time.sleep(0.25)
                st, b = request('GET', path)
            if st != 200:
                problems.append('the owner\'s list answered %d %r (metrics: %s)' % (
                    st, b, self.metrics(request)))
                break
            listed |= {x['entity']['id'] for x in b.get('data') or []}
            cursor = b.get('nextCursor')
            if not cursor:
                break
        shown = sorted(set(deleted) & listed)
        if shown:
            problems.append('the owner\'s list shows deleted entities %r' % shown[:5])
        missing = sorted(set(live) - listed)
        if missing:
            problems.append('the owner\'s list lacks live entities %r' % missing[:5])
        return problems


    @staticmethod
    def metrics(request):
        st, text = request('GET', '/metrics')
        if not isinstance(text, str):
            return st
        return ', '.join(ln for ln in text.splitlines() if ln.startswith((
            'entityd_redis_connected', 'entityd_redis_pending', 'entityd_redis_shed')))


class Cycle:
    """One worker's throwaway entity, step by step (the module's docstring)."""

    STEPS = ('create', 'find', 'skills', 'skills-read', 'add', 'award', 'level', 'refuse',
             'rename', 'drop-level', 'drop-skill', 'board', 'remove', 'leave', 'read-v',
             'delete', 'gone')

    def __init__(self, reg, worker, rng, gap_s):
        self.reg, self.world, self.worker, self.rng = reg, reg.world, worker, rng
        self.gap_s = gap_s
        self.started = None  # when the last cycle began (monotonic)
        self.alias = 'cyc-w%d' % worker
        self.n = 0
        self.step = None
        self.tries = 0
        self.ctx = {}
        self.token = uuid.uuid4().hex[:6]

    def case_args(self):
        return {'make': self.make, 'expect': self.expect}

    def start(self):
        self.n += 1
        w = self.world
        self.ctx = {'name': 'Cycle %d.%d' % (self.worker, self.n), 'eid': None, 'sids': {},
                    'members': ['0x%08x%032x' % (self.worker, self.rng.randrange(1 << 120))
                                for _ in range(2)] + [w.member.address.lower()]}
        self.go('create')
        self.reg.count('cycles')

    def go(self, step):
        self.step, self.tries = step, 0

    def make(self):
        if self.step is None:
            if self.started is not None and time.monotonic() - self.started < self.gap_s:
                self.step = 'wait'
                return 'GET', '/healthz', None, None
            self.started = time.monotonic()
            self.start()
        if self.step == 'wait':
            self.step = None
            return self.make()
        self.tries += 1
        c, w = self.ctx, self.world
        eid = c['eid']
        base = '/api/entities/%s' % eid
        s = self.step
        if s == 'create':
            body = w.entity_body(c['name'], alias=self.alias)
            return 'POST', '/api/entities?' + w.owner_auth, body, None
        if s == 'find':
            return 'GET', '/api/entities/by-alias/%s?%s' % (self.alias, w.owner_auth), None, None
        if s == 'skills':
            return 'POST', '/api/skills/multiple?' + w.owner_auth, \
                {'names': ['ca', 'cb'], 'entityID': eid}, None
        if s == 'skills-read':
            return 'GET', '/api/skills?entityID=%s&%s' % (eid, w.owner_auth), None, None
        if s == 'add':
            return 'POST', '%s/force-add?%s' % (base, w.owner_auth), \
                {'addresses': c['members'], 'Chain': 'eth'}, None
        if s == 'award':
            key = 'cyc%d-%s-%d' % (self.worker, self.token, self.n)
            m1, m2 = c['members'][:2]
            return 'POST', '%s/contributions?%s' % (base, w.owner_auth), {
                'idempotencyKey': key, 'contributions': [
                    {'member': m1, 'title': 'idem %s #0' % key,
                     'skills': [{'skillId': c['sids']['ca'], 'score': 3}]},
                    {'member': m2, 'title': 'idem %s #1' % key,
                     'skills': [{'skillId': c['sids']['cb'], 'score': 2}]}]}, None
        if s == 'level':
            return 'POST', '%s/levels/lv-c/update?%s' % (base, w.owner_auth), \
                {'name': 'L', 'description': '', 'skillIds': [c['sids']['ca']], 'scores': [1],
                 'XP': 2, 'endsAt': ''}, None
        if s in ('refuse', 'drop-skill'):
            return 'DELETE', '%s/skills/%s?%s' % (base, c['sids']['ca'], w.owner_auth), None, \
                None
        if s == 'rename':
            return 'POST', '%s/skills/%s/update?%s' % (base, c['sids']['cb'], w.owner_auth), \
                {'name': 'cb renamed %d' % self.n}, None
        if s == 'drop-level':
            return 'DELETE', '%s/levels/lv-c?%s' % (base, w.owner_auth), None, None
        if s == 'board':
            return 'GET', '%s/leaderboard?by=%s&%s' % (base, c['sids']['ca'], w.member_auth), \
                None, None
        if s == 'remove':
            return 'DELETE', '%s/members/%s?%s' % (base, c['members'][1], w.owner_auth), None, \
                None
        if s == 'leave':
            return 'POST', '%s/leave?%s' % (base, w.member_auth), None, None
        if s == 'read-v':
            return 'GET', '%s?%s' % (base, w.owner_auth), None, None
        if s == 'delete':
            self.reg.set(eid, 'deleting')
            return 'DELETE', '%s?v=%s&%s' % (base, c['v'], w.owner_auth), None, None
        return 'GET', '%s?%s' % (base, w.owner_auth), None, None  # gone

    def expect(self, resp):
        if self.step == 'wait':
            self.step = None
            return None if resp.status == 200 else 'healthz %d' % resp.status
        err, nxt = self.check(resp)
        if err is None:
            self.reg.count('steps')
            if nxt == 'end':
                self.step = None
            else:
                self.go(nxt)
            return None
        where = '%s (cycle %d, step %s, try %d)' % (err, self.n, self.step, self.tries)
        if resp.status not in (503, 504):
            # A wrong answer (reported): the entity, when there is one, is deleted as usual so
            # that the next cycle finds the alias free; else a new cycle begins.
            eid = self.ctx.get('eid')
            if eid and self.step not in ('read-v', 'delete', 'gone'):
                self.go('read-v')
            else:
                if eid and self.reg.get(eid) == 'deleting':
                    self.reg.set(eid, 'live')
                self.step = None
        return where

    def check(self, resp):
        """(problem or None, the next step)."""
        s, c, retry = self.step, self.ctx, self.tries > 1
        b = resp.json() or {}
        d = b.get('data') if isinstance(b.get('data'), dict) else {}
        if s == 'create':
            if resp.status == 409 and retry:
                # Our earlier try may hold the alias: find which entity does.
                self.reg.count('retried_create_409')
                return error_envelope(resp, 'conflict'), 'find'
            err = ok_json(201)(resp)
            if err:
                return 'create with the alias of a deleted entity: ' + err, None
            if d.get('name') != c['name'] or d.get('communityURLAlias') != self.alias:
                return 'created %r' % resp.body[:200], None
            c['eid'] = d['id']
            self.reg.set(d['id'], 'live')
            return None, 'skills'
        if s == 'find':
            if resp.status == 404:
                # The claim is a leftover of our own try that never wrote: free once stale.
                time.sleep(0.5)
                return None, 'create'
            err = ok_json(200)(resp)
            if err:
                return err, None
            if d.get('name') != c['name']:
                return 'alias %s held by %r, not this cycle\'s' % (self.alias, d.get('name')), None
            c['eid'] = d['id']
            self.reg.set(d['id'], 'live')
            return None, 'skills'
        if s == 'skills':
            if resp.status == 409 and retry:
                return error_envelope(resp, 'conflict'), 'skills-read'
            err = ok_json(201)(resp)
            if err:
                return err, None
            data = b.get('data') if isinstance(b.get('data'), list) else []
            c['sids'] = {x.get('name'): x.get('id') for x in data}
            if sorted(c['sids']) != ['ca', 'cb']:
                return 'skills made %r' % resp.body[:200], None
            return None, 'add'
        if s == 'skills-read':
            err = ok_json(200)(resp)
            if err:
                return err, None
            c['sids'] = {x.get('name'): x.get('id') for x in d.get('skills') or []}
            if sorted(c['sids']) != ['ca', 'cb']:
                return 'skills listed %r' % resp.body[:200], None
            return None, 'add'
        if s == 'add':
            err = ok_json(200)(resp)
            if not err and (b.get('added', 0) + b.get('existing', 0) != 3 or
                            (not retry and b.get('added') != 3)):
                err = 'force-add answered %r' % resp.body[:200]
            return err, 'award'
        if s == 'award':
            err = ok_json(200 if retry and resp.status == 200 else 201)(resp)
            if not err and retry and resp.status == 200 and b.get('replayed') is not True:
                err = 'a retried award answered 200 without replayed'
            return err, 'level'
        if s == 'level':
            if resp.status not in (200, 201):
                return 'level %d %r' % (resp.status, resp.body[:200]), None
            return ok_json(resp.status)(resp), 'refuse'
        if s == 'refuse':
            code, field, msg = _field(resp)
            if resp.status != 409 or (code, field) != ('conflict', 'skillId') or \
                    'lv-c' not in msg:
                return 'deleting a skill a level names: %d %r' % (resp.status,
                                                                  resp.body[:200]), None
            return None, 'rename'
        if s == 'rename':
            err = ok_json(200)(resp)
            if not err and d.get('name') != 'cb renamed %d' % self.n:
                err = 'renamed %r' % resp.body[:200]
            return err, 'drop-level'
        if s in ('drop-level', 'drop-skill'):
            nxt = 'drop-skill' if s == 'drop-level' else 'board'
            if resp.status == 404 and retry:
                return error_envelope(resp, 'not_found'), nxt
            err = ok_json(200)(resp)
            if not err and b.get('deleted') is not True:
                err = '%s answered %r' % (s, resp.body[:200])
            return err, nxt
        if s == 'board':
            code, field, _ = _field(resp)
            if resp.status != 400 or field != 'by':
                return 'the board of a deleted skill: %d %r' % (resp.status,
                                                               resp.body[:200]), None
            return None, 'remove'
        if s in ('remove', 'leave'):
            err = ok_json(200)(resp)
            done = b.get('removed', 0) + b.get('missing', 0) if s == 'remove' else 1
            if not err and (done != 1 or (not retry and b.get('removed') != 1)):
                err = '%s answered %r' % (s, resp.body[:200])
            return err, 'leave' if s == 'remove' else 'read-v'
        if s == 'read-v':
            err = ok_json(200)(resp)
            if not err and not isinstance(d.get('__v'), int):
                err = 'entity %r' % resp.body[:200]
            c['v'] = d.get('__v')
            return err, 'delete'
        if s == 'delete':
            if resp.status == 404 and retry:
                self.reg.set(c['eid'], 'deleted')
                return error_envelope(resp, 'not_found'), 'gone'
            err = ok_json(200)(resp)
            if not err and b.get('deleted') is not True:
                err = 'delete answered %r' % resp.body[:200]
            if not err:
                self.reg.set(c['eid'], 'deleted')
            return err, 'gone'
        if resp.status != 404:
            return 'a deleted entity answered %d' % resp.status, None
        return error_envelope(resp, 'not_found'), 'end'


class Race:
    """Force-adds and awards to a throwaway entity of any worker (Lifecycles.target)."""

    def __init__(self, reg, worker, rng):
        self.reg, self.world, self.worker, self.rng = reg, reg.world, worker, rng
        self.sent = None  # (entity id, its state when the request was built, kind)
        self.n = 0
        self.token = uuid.uuid4().hex[:6]

    def case_args(self):
        return {'make': self.make, 'expect': self.expect}

    def make(self):
        w = self.world
        eid = self.reg.target(self.rng)
        if eid is None:
            self.sent = None
            return 'GET', '/healthz', None, None
        self.n += 1
        kind = 'award' if self.n % 2 else 'add'
        self.sent = (eid, self.reg.get(eid), kind)
        if kind == 'add':
            return 'POST', '/api/entities/%s/force-add?%s' % (eid, w.owner_auth), \
                {'addresses': ['0x%08x%032x' % (self.worker, self.rng.randrange(1 << 120))],
                 'Chain': 'eth'}, None
        key = 'race%d-%s-%d' % (self.worker, self.token, self.n)
        return 'POST', '/api/entities/%s/contributions?%s' % (eid, w.owner_auth), \
            {'member': w.member.address.lower(), 'xp': 1, 'title': 'idem ' + key,
             'idempotencyKey': key}, None

    def expect(self, resp):
        if self.sent is None:
            return None if resp.status == 200 else 'healthz %d' % resp.status
        eid, was, kind = self.sent
        self.reg.count('races')
        if resp.status == 404:
            self.reg.count('races_404')
            if was == 'live' and self.reg.get(eid) == 'live':
                return 'a %s to a live entity answered 404' % kind
            return error_envelope(resp, 'not_found')
        if was == 'deleted' and resp.status not in (503, 504):
            return 'a %s sent after the delete was answered: %d %r' % (
                kind, resp.status, resp.body[:200])
        if kind == 'award' and resp.status == 400:
            # The member wallet is a member between the cycle's add and leave steps only.
            code, field, _ = _field(resp)
            return None if field == 'member' else 'award %r' % resp.body[:200]
        return ok_json(201 if kind == 'award' else 200)(resp)
