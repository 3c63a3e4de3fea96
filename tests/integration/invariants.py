"""Data-set invariants over every key entityd writes (service/redis/keys.h), shared by the fault and
adversary tests.

check_invariants(r, versions=None) returns a list of problems (empty when consistent):
- every entity has its hash with every field, a non-empty owners set, a pre-rendered Entity JSON
  in step with its fields and owners; owners and admins are lowercase addresses;
- the members hash and members:order hold the same entries, one per member;
- the skills hash, skills:order and skills:names map one to one; levels and levels:order agree
  and name existing skills;
- aliases: an entity's alias is held by that entity, no alias is named by two entities, every
  alias key holds an entity id;
- member progression (CONTRACT section 5): every contribution record is listed once in its
  member's contribs:of index; each member's prog xp and every s:<skill> score equal the sums
  over the member's non-revoked contributions; lb:xp and each lb:s:<skill> hold exactly
  "<9999999999999999 - value, 16 digits>:<address>" for the members whose value is above 0
  (a skill's value: its total, the own scores of it and of every skill below it in the tree
  the progression template's S lines give; a member's t:<skill> field, where present, is that
  total, and where absent the own score is; a board being rebuilt, named in lb:rebuild, is
  only checked to hold each member once, at its t:<skill> or s:<skill> value),
  and besides only removed members' entries: on lb:xp each tombstoned in the board's gone
  zset, on a skill board either so (an earlier version's removal) or with its address in
  lb:unswept; each such entry is its removed member's entry at the value its progress holds
  now (a revocation since the removal took the old one off), or one a sweep record lists
  (records: removals by an earlier version; a record may list more: entries the sweeper took
  off already, until no tombstone is left); every board with tombstones is listed in
  lb:tombstoned (unless a sweep record is there: the sweeper then reads every board); a
  deleted skill has neither board nor tombstones;
  every contribution has exactly one contribution.added event, every revoked one exactly one
  contribution.revoked and no other one any, every reachedAt recorded exactly one level.reached
  event (when the stream was trimmed by EVENTS_MAX, at most one); an idempotency key's stored
  answer names contributions as stored, and no key was applied twice (contributions titled
  "idem <key>" or "idem <key> #<i>", tests/adversary/workload.py, are each the key's only one);
- finding (CONTRACT §9): every owner, admin and member of an entity this release indexed (named in
  dir:{entities}:meta) has its entry in the wallet's list and in that role's list (the entries
  are added before the entity write, so no stored role lacks one);
- no key outside the documented shapes;
- with versions (an object with problems() and max_seen(eid), e.g. clients.VersionLog): no
  entity's __v was seen to go backwards during the run, and the stored __v is not below the
  highest one an answer showed (an acknowledged write was not lost);
- with acks (workload.Acks): every acknowledged award is stored and every acknowledged
  revocation is revoked.
"""

import json
import re

ADDRESS = re.compile(r'^0x[0-9a-f]{40}$')
IDEM_TITLE = re.compile(r'^idem ([A-Za-z0-9_-]{1,64})(?: #(\d+))?$')
ENTITY_PARTS = {'', 'owners', 'admins', 'members', 'members:order', 'skills', 'skills:order',
                'skills:names', 'levels', 'levels:order', 'levels:gen', 'contribs', 'lb:xp',
                'events', 'erasure', 'lb:xp:gone', 'sweep', 'lb:tombstoned', 'lb:unswept',
                'lb:rebuild', 'lb:rebuild:boards'}
ENTITY_PREFIXES = ('contribs:of:', 'prog:', 'lb:s:', 'idem:', 'awards:')


ENTITY_FIELDS = {'id', 'name', 'description', 'contracts', 'twitter', 'discord', 'website',
                 'telegram', 'instagram', 'openseaSlug', 'imageURL', 'bannerURL',
                 'defaultDyNftThemeId', 'communityURLAlias', 'public', 'isEnabled', 'createdAt',
                 'modifiedAt', 'createdBy', '__v'}


def lb_entry(value, address):
    return '%016d:%s' % (9999999999999999 - value, address)


def _stream_events(r, key):
    """(events as (id, fields dict), trimmed: whether EVENTS_MAX dropped any)."""
    events = []
    start = '-'
    for _ in range(100000):  # pages of 10000
        page = r.cli('XRANGE', key, start, '+', 'COUNT', 10000, timeout=30) or []
        for eid, flat in page:
            events.append((eid.decode(), {flat[i].decode(): flat[i + 1].decode()
                                          for i in range(0, len(flat), 2)}))
        if len(page) < 10000:
            break
        start = '(' + events[-1][0]
    trimmed = False
    if events:
        info = r.cli('XINFO', 'STREAM', key, timeout=30) or []
        fields = {info[i].decode(): info[i + 1] for i in range(0, len(info) - 1, 2)
                  if isinstance(info[i], bytes)}
        added = fields.get('entries-added')
        # Without the counter (Redis before 7): trimmed unless the stream is short.
        trimmed = added != len(events) if isinstance(added, int) else len(events) >= 1000
    return events, trimmed


def check_progression(r, eid, parts, hgetall, zset, loads, acks=None):
    """The progression keys of one entity (keys.h); returns a list of problems."""
    problems = []
    E = 'ent:{%s}' % eid
    recs = {}
    for cid, text in hgetall(E + ':contribs').items():
        c = loads(text, '%s contribution %s' % (eid, cid))
        if not isinstance(c, dict):
            continue
        if c.get('id') != cid or c.get('entityID') != eid or \
                not ADDRESS.match(str(c.get('member'))) or \
                not isinstance(c.get('xp'), int) or c['xp'] < 0 or \
                not isinstance(c.get('skills'), list) or \
                not isinstance(c.get('revoked'), bool) or \
                c['revoked'] != (c.get('revokedAt') is not None):
            problems.append('%s: contribution %s is %r' % (eid, cid, text[:200]))
            continue
        recs[cid] = c
    # contribs:of:<address>: each contribution listed once, under its member
    listed = {}
    for rest in parts:
        if not rest.startswith('contribs:of:'):
            continue
        addr = rest[len('contribs:of:'):]
        for entry, score in zset(parts[rest]):
            cid = entry[17:]
            if not entry[:16].isdigit() or entry[16:17] != ':' or score != 0:
                problems.append('%s: contribs:of:%s entry %r' % (eid, addr, entry[:80]))
            elif cid not in recs or recs[cid]['member'] != addr:
                problems.append('%s: contribs:of:%s lists %s, a contribution of %r' % (
                    eid, addr, cid, recs.get(cid, {}).get('member')))
            listed[cid] = listed.get(cid, 0) + 1
    for cid in recs:
        if listed.get(cid) != 1:
            problems.append('%s: contribution %s listed %d times in contribs:of' % (
                eid, cid, listed.get(cid, 0)))
    # prog:<address> against the sums of non-revoked contributions
    want = {}  # address -> {'xp': n, skill id: n}
    for c in recs.values():
        if c['revoked']:
            continue
        w = want.setdefault(c['member'], {})
        w['xp'] = w.get('xp', 0) + c['xp']
        for s in c['skills']:
            w[s.get('skillId')] = w.get(s.get('skillId'), 0) + s.get('score', 0)
    have, reached, totals_at = {}, {}, {}
    for rest in parts:
        if not rest.startswith('prog:'):
            continue
        addr = rest[5:]
        h = hgetall(parts[rest])
        vals, tvals = {}, {}
        totals_at[addr] = tvals
        for f, v in h.items():
            if f.startswith('t:') and v.lstrip('-').isdigit():
                tvals[f[2:]] = int(v)
            elif f == 'xp' or f.startswith('s:'):
                if not v.lstrip('-').isdigit():
                    problems.append('%s: prog:%s %s is %r' % (eid, addr, f, v))
                    continue
                vals['xp' if f == 'xp' else f[2:]] = int(v)
            elif f.startswith('r:') and v.isdigit():
                # "r:<level id>[:<generation>]": a level id deleted and created again has a
                # record (and a level.reached event) per generation reached
                k = (addr, f[2:].split(':')[0])
                reached[k] = reached.get(k, 0) + 1
            else:
                problems.append('%s: prog:%s field %s = %r' % (eid, addr, f, v))
        have[addr] = vals
    for addr in set(want) | set(have):
        w = {k: v for k, v in want.get(addr, {}).items() if v}
        h = {k: v for k, v in have.get(addr, {}).items() if v}
        if w != h:
            problems.append('%s: prog:%s holds %r, its non-revoked contributions sum to %r' % (
                eid, addr, h, w))
    # leaderboards against the prog hashes: each board holds the entries of the members whose
    # value is above 0, and the entries of removed members the sweeper has not taken off yet;
    # those are in the board's gone zset, each at its member's value now, or listed by a sweep
    # record of an earlier version's removal (keys.h; a record also lists the entries swept
    # already, until every tombstone is gone)
    members = set(hgetall(E + ':members'))
    skills = set(hgetall(E + ':skills'))
    # the tree as the progression template gives it (keys.h), and each member's totals by it
    tpl = r.cli('HGET', E, 'progtpl', timeout=30) or b''
    tpl = tpl.decode() if isinstance(tpl, bytes) else tpl
    parent = {}
    for line in tpl.split('\n'):
        cols = line.split('\t')
        if cols[0] == 'S' and len(cols) >= 4 and cols[3]:
            parent[cols[1]] = cols[3]
    rebuilding = set(m.decode() for m in r.cli('SMEMBERS', E + ':lb:rebuild:boards',
                                               timeout=30) or []) \
        if 'lb:rebuild:boards' in parts else set()

    def total(addr, sid):
        vals = have.get(addr, {})
        n = 0
        for s, v in vals.items():
            if s == 'xp' or s not in skills:
                continue
            at, hops = s, 0
            while at is not None and hops <= 9:
                if at == sid:
                    n += v
                    break
                at, hops = parent.get(at), hops + 1
        return n

    def stored(addr, by):
        """What a board lists a member at: its t: field, else its own score (or XP)."""
        if by != 'xp' and by in totals_at.get(addr, {}):
            return totals_at[addr][by]
        return have.get(addr, {}).get(by, 0)
    for addr, tvals in totals_at.items():
        if addr not in members:
            continue
        for sid, v in tvals.items():
            if sid in skills and sid not in rebuilding and v != total(addr, sid):
                problems.append('%s: prog:%s t:%s is %d, its total by the tree %d' % (
                    eid, addr, sid, v, total(addr, sid)))
    recorded = {}  # by -> set of entries the sweep records list
    tombstoned = set(m.decode() for m in r.cli('SMEMBERS', parts['lb:tombstoned'], timeout=30)
                     or []) if 'lb:tombstoned' in parts else set()
    for rec, sc in (zset(parts['sweep']) if 'sweep' in parts else []):
        toks = rec.split(' ')
        addr = toks[0]
        if not ADDRESS.match(addr) or len(toks) < 2 or sc != 0:
            problems.append('%s: sweep record %r' % (eid, rec[:120]))
            continue
        if addr in members:
            problems.append('%s: sweep record of %s, a member' % (eid, addr))
        for t in toks[1:]:
            by, _, inv = t.partition('=')
            if len(inv) != 16 or not inv.isdigit():
                problems.append('%s: sweep record %r' % (eid, rec[:120]))
            recorded.setdefault(by, set()).add(inv + ':' + addr)
    unswept = set(m.decode() for m in r.cli('SMEMBERS', parts['lb:unswept'], timeout=30)
                  or []) if 'lb:unswept' in parts else set()
    boards = {'xp'} | skills | {rest[5:].split(':')[0] for rest in parts if rest.startswith('lb:s:')}
    for by in boards:
        key = E + (':lb:xp' if by == 'xp' else ':lb:s:' + by)
        got = zset(key)
        gone = zset(key + ':gone')
        if by != 'xp' and by not in skills:
            if got or gone:
                problems.append('%s: the board of deleted skill %s is still there' % (eid, by))
            continue
        if by == 'xp':
            expect = sorted(lb_entry(vals[by], addr) for addr, vals in have.items()
                            if addr in members and vals.get(by, 0) > 0)
        elif by in rebuilding:
            expect = sorted(lb_entry(stored(addr, by), addr) for addr in have
                            if addr in members and stored(addr, by) > 0)
        else:
            expect = sorted(lb_entry(total(addr, by), addr) for addr in have
                            if addr in members and total(addr, by) > 0)
        entries = set(m for m, _ in got)
        tomb = set(m for m, _ in gone)
        # a skill board's entries of removed members the sweeper has not reached (lb:unswept)
        waiting = set() if by == 'xp' else set(
            m for m in entries - tomb if m[17:] not in members and m[17:] in unswept)
        live = sorted(entries - tomb - waiting)
        if live != expect or any(sc != 0 for _, sc in got):
            problems.append('%s: leaderboard %s holds %r, the prog hashes say %r' % (
                eid, by, live[:6], expect[:6]))
        if not tomb <= entries or any(sc != 0 for _, sc in gone) or \
                any(m[17:] in members for m in tomb):
            problems.append('%s: tombstones of %s %r are not removed members\' board entries' % (
                eid, by, sorted(tomb - entries)[:6] or sorted(tomb)[:6]))
        if tomb and 'sweep' not in parts and by not in tombstoned:
            problems.append('%s: tombstones of %s, a board lb:tombstoned does not list' % (
                eid, by))
        now = set(lb_entry(stored(addr, by), addr) for addr in have
                  if addr not in members and stored(addr, by) > 0)
        stray = (tomb | waiting) - now - recorded.get(by, set())
        if stray:
            problems.append('%s: tombstones of %s %r, not at their members\' values now' % (
                eid, by, sorted(stray)[:6]))
    # events: one contribution.added per contribution, one contribution.revoked per revoked
    # one, one level.reached per reachedAt
    events, trimmed = _stream_events(r, E + ':events') if 'events' in parts else ([], False)
    added, revoked, reached_ev = {}, {}, {}
    for evid, f in events:
        t = f.get('type')
        if t not in ('contribution.added', 'contribution.revoked', 'level.reached'):
            continue
        d = loads(f.get('data', ''), '%s event %s' % (eid, evid))
        if not isinstance(d, dict):
            continue
        if t == 'level.reached':
            k = (d.get('member'), d.get('level'))
            reached_ev[k] = reached_ev.get(k, 0) + 1
            continue
        cid = d.get('id')
        tab = added if t == 'contribution.added' else revoked
        tab[cid] = tab.get(cid, 0) + 1
        c = recs.get(cid)
        if c is None or d.get('member') != c['member'] or (
                t == 'contribution.added' and d.get('xp') != c['xp']):
            problems.append('%s: event %s %s names %s, stored as %r' % (
                eid, evid, t, cid, c and (c['member'], c['xp'])))
    bound = (lambda n, want=1: n <= want) if trimmed else (lambda n, want=1: n == want)
    for cid, c in recs.items():
        if not bound(added.get(cid, 0)):
            problems.append('%s: contribution %s has %d contribution.added events' % (
                eid, cid, added.get(cid, 0)))
        if not bound(revoked.get(cid, 0)) if c['revoked'] else revoked.get(cid):
            problems.append('%s: contribution %s (revoked %s) has %d contribution.revoked '
                            'events' % (eid, cid, c['revoked'], revoked.get(cid, 0)))
    for k in set(reached) | set(reached_ev):
        n = reached_ev.get(k, 0)
        if (k in reached and not bound(n, reached[k])) or (k not in reached and n):
            problems.append('%s: %s reached %s: reachedAt %s, %d level.reached events' % (
                eid, k[0], k[1], 'kept' if k in reached else 'missing', n))
    # idempotency keys: the stored answer as stored; no key applied twice
    by_key = {}
    for cid, c in recs.items():
        m = IDEM_TITLE.match(str(c.get('title')))
        if m:
            by_key.setdefault((m.group(1), m.group(2)), []).append(cid)
    for k, cids in by_key.items():
        if len(cids) > 1:
            problems.append('%s: idempotency key %s applied %d times: %s' % (
                eid, k[0], len(cids), sorted(cids)))
    answered = {}
    for rest in parts:
        if not rest.startswith('idem:'):
            continue
        key = rest[5:]
        text = (r.cli('GET', parts[rest]) or b'').decode()
        digest, _, answer = text.partition('\n')
        ans = loads(answer, '%s idem:%s answer' % (eid, key)) if answer else None
        if len(digest) != 40 or not isinstance(ans, list) or not ans:
            problems.append('%s: idem:%s holds %r' % (eid, key, text[:120]))
            continue
        for c in ans:
            s = recs.get(c.get('id')) if isinstance(c, dict) else None
            if s is None or any(s.get(f) != c.get(f) for f in (
                    'member', 'xp', 'skills', 'title', 'createdAt', 'createdBy')):
                problems.append('%s: idem:%s answered %r, stored %r' % (
                    eid, key, str(c)[:120], s and s.get('title')))
            else:
                answered[c['id']] = key
    idem_keys = {rest[5:] for rest in parts if rest.startswith('idem:')}
    for (key, _), cids in by_key.items():
        for cid in cids:
            if key in idem_keys and answered.get(cid) != key:
                problems.append('%s: contribution %s titled with key %s is not its answer' % (
                    eid, cid, key))
    if acks is not None:
        awarded, revoked_acks = acks
        for cid, member in awarded.get(eid, {}).items():
            if cid not in recs or recs[cid]['member'] != member:
                problems.append('%s: acknowledged award %s is not stored' % (eid, cid))
        for cid in revoked_acks.get(eid, ()):
            if not recs.get(cid, {}).get('revoked'):
                problems.append('%s: acknowledged revocation of %s is not stored' % (eid, cid))
    return problems


def check_invariants(r, versions=None, versions_durable=True, acks=None):
    """Every key of the data set (service/redis/keys.h), checked for the states whole writes leave.
    Returns a list of problems (empty when consistent)."""
    problems = []
    acks = acks.snapshot() if acks is not None else None
    keys = [k.decode() for k in r.cli('KEYS', '*', timeout=30)]
    by_entity = {}
    aliases = {}
    for k in keys:
        if k.startswith('ent:{'):
            tag, _, rest = k[5:].partition('}')
            rest = rest[1:] if rest.startswith(':') else rest
            if rest not in ENTITY_PARTS and not rest.startswith(ENTITY_PREFIXES):
                problems.append('unknown key %s' % k)
            by_entity.setdefault(tag, {})[rest] = k
        elif k.startswith('alias:{'):
            aliases[k[7:-1]] = k
        elif re.match(r'^wallet:\{0x[0-9a-f]{40}\}:(meta|any|owner|admin|member)$', k):
            pass
        elif k in ('dir:{entities}:meta', 'dir:{entities}:created', 'dir:{entities}:names',
                   'find:backfill:lease', 'find:backfill:done') or \
                k.startswith('find:backfill:cursor:'):
            pass
        elif not k.startswith(('auth:revoked:', 'limit:{')) and \
                k not in ('erasures', 'sweeps', 'erase:scan', 'erase:ids'):
            problems.append('unknown key %s' % k)

    def hgetall(key):
        flat = r.cli('HGETALL', key, timeout=30) or []
        return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

    def zset(key):
        flat = r.cli('ZRANGE', key, 0, -1, 'WITHSCORES', timeout=30) or []
        return [(flat[i].decode(), float(flat[i + 1])) for i in range(0, len(flat), 2)]

    def loads(text, what):
        try:
            return json.loads(text)
        except ValueError:
            problems.append('%s is not JSON: %r' % (what, text[:200]))
            return None

    if 'erase:scan' in keys:
        # The shared erasure scan of a single Redis (keys.h): a cursor, and the pass completed
        # last before the one under way, which began no earlier.
        sc = hgetall('erase:scan')
        try:
            ok = (int(sc['cursor']) >= 0 and int(sc['pass']) >= 1 and
                  int(sc['donePass']) in (0, int(sc['pass']) - 1) and
                  int(sc['doneStart']) <= int(sc['passStart']))
        except (KeyError, ValueError):
            ok = False
        if not ok:
            problems.append('erase:scan malformed: %r' % sc)
    if 'erase:ids' in keys:
        # The entities the shared scan erases: each one's record is there until its end.
        for m in r.cli('SMEMBERS', 'erase:ids', timeout=30) or []:
            if 'ent:{%s}:erasure' % m.decode() not in keys:
                problems.append('erase:ids names %s, which has no erasure record' % m.decode())

    alias_of = {}
    stored_v = {}
    erasing = set(m.decode().split(':')[0]
                  for m in r.cli('ZRANGE', 'erasures', 0, -1, timeout=30) or [])
    for eid, parts in by_entity.items():
        if 'erasure' in parts:
            # Deleted, its keys erased in the background (keys.h): its record must be findable,
            # and no entity hash may stand beside it.
            if eid not in erasing:
                problems.append('%s: an erasure record not listed in erasures' % eid)
            if '' in parts:
                problems.append('%s: an entity hash beside its erasure record' % eid)
            continue
        if '' not in parts:
            problems.append('%s: keys %s without the entity hash' % (eid, sorted(parts)))
            continue
        ent = hgetall(parts[''])
        missing = ENTITY_FIELDS - set(ent)
        if missing:
            problems.append('%s: entity hash lacks %s' % (eid, sorted(missing)))
            continue
        owners = sorted(a.decode() for a in r.cli('SMEMBERS', 'ent:{%s}:owners' % eid) or [])
        if not owners:
            problems.append('%s: no owners' % eid)
        bad = [a for a in owners if not ADDRESS.match(a)]
        if bad:
            problems.append('%s: owners that are not lowercase addresses: %r' % (eid, bad[:3]))
        admins = sorted(a.decode() for a in r.cli('SMEMBERS', 'ent:{%s}:admins' % eid) or [])
        bad = [a for a in admins if not ADDRESS.match(a)]
        if bad:
            problems.append('%s: admins that are not lowercase addresses: %r' % (eid, bad[:3]))
        stored_v[eid] = int(ent['__v']) if ent['__v'].isdigit() else None
        if ent['id'] != eid or not ent['__v'].isdigit():
            problems.append('%s: id %r, __v %r' % (eid, ent['id'], ent['__v']))
        if 'json' in ent:  # the pre-rendered Entity, in step with the fields and owners
            j = loads(ent['json'], '%s entity json' % eid) or {}
            want = {'id': eid, 'name': ent['name'], 'ownerAddress': owners,
                    'communityURLAlias': ent['communityURLAlias'],
                    'public': ent['public'] != '0', 'isEnabled': ent['isEnabled'] != '0',
                    '__v': int(ent['__v']) if ent['__v'].isdigit() else None}
            got = {k: j.get(k) for k in want}
            if got != want:
                problems.append('%s: entity json %r, fields say %r' % (eid, got, want))
        if ent['communityURLAlias']:
            alias_of[eid] = ent['communityURLAlias']
        # members: hash address -> entry, order the same entries
        # "<addedAt 16 digits>:<address>:<addedBy>:<chain>", score 0
        members = hgetall('ent:{%s}:members' % eid)
        seen = {}
        for entry, score in zset('ent:{%s}:members:order' % eid):
            at, a = entry[:16], entry[17:59]
            if not at.isdigit() or entry[16] != ':' or entry[59] != ':' or \
                    entry[102:103] != ':' or score != 0:
                problems.append('%s: member order entry %r score %r' % (eid, entry[:80], score))
                continue
            seen[a] = seen.get(a, 0) + 1
            if members.get(a) != entry:
                problems.append('%s: member %s order entry %r, hash %r' % (
                    eid, a, entry[:120], members.get(a, '')[:120]))
        if set(seen) != set(members) or any(n != 1 for n in seen.values()):
            problems.append('%s: members hash (%d) and order (%d entries) differ' % (
                eid, len(members), sum(seen.values())))
        if r.cli('HEXISTS', 'dir:{entities}:meta', eid) == 1:
            held = [(a, 'owner') for a in owners] + [(a, 'admin') for a in admins] + \
                [(a, 'member') for a in members]
            for a, role in held:
                meta = r.cli('HGET', 'wallet:{%s}:meta' % a, eid)
                entry = '%s:%s' % (meta.decode().split(' ')[0], eid) if meta else None
                if not entry or r.cli('ZSCORE', 'wallet:{%s}:any' % a, entry) is None or \
                        r.cli('ZSCORE', 'wallet:{%s}:%s' % (a, role), entry) is None:
                    problems.append('%s: %s is %s without its index entry' % (eid, a, role))
        # skills: hash id -> JSON, order holds the same JSONs, names map one to one
        skills = hgetall('ent:{%s}:skills' % eid)
        sorder = zset('ent:{%s}:skills:order' % eid)
        names = hgetall('ent:{%s}:skills:names' % eid)
        if sorted(m for m, _ in sorder) != sorted(skills.values()):
            problems.append('%s: skills hash (%d) and order (%d) differ' % (
                eid, len(skills), len(sorder)))
        if sorted(names.values()) != sorted(skills):
            problems.append('%s: skill names (%d) do not map one to one onto skills (%d)' %
                            (eid, len(names), len(skills)))
        for sid, rec in skills.items():
            sk = loads(rec, '%s skill %s' % (eid, sid)) or {}
            norm = str(sk.get('name', '')).strip(' \t\n\r').lower()
            if sk.get('id') != sid or names.get(norm) != sid:
                problems.append('%s: skill %s %r not indexed by its name' % (eid, sid, rec[:100]))
        # levels: hash id -> JSON, order the same JSONs scored by XP, skills that exist
        levels = hgetall('ent:{%s}:levels' % eid)
        lorder = zset('ent:{%s}:levels:order' % eid)
        if sorted(m for m, _ in lorder) != sorted(levels.values()):
            problems.append('%s: levels hash (%d) and order (%d) differ' % (
                eid, len(levels), len(lorder)))
        for m, score in lorder:
            lv = loads(m, '%s level order entry' % eid) or {}
            if lv.get('XP') != score:
                problems.append('%s: level %s XP %r scored %r' % (eid, lv.get('id'),
                                                                 lv.get('XP'), score))
        for lid, rec in levels.items():
            lv = loads(rec, '%s level %s' % (eid, lid)) or {}
            ids = lv.get('skillIds', [])
            if lv.get('id') != lid:
                problems.append('%s: level %s record id %r' % (eid, lid, lv.get('id')))
            if any(x not in skills for x in ids):
                problems.append('%s: level %s names a skill that does not exist' % (eid, lid))
            if len(lv.get('scores', [])) != len(ids):
                problems.append('%s: level %s scores and skillIds differ in length' % (eid, lid))
        problems.extend(check_progression(r, eid, parts, hgetall, zset, loads, acks))
    # An entity's alias is held by that entity. An alias key held by another entity is a stale
    # claim (a crash between the claim and the write), which the next claimant takes over.
    for eid, alias in alias_of.items():
        holder = (r.cli('GET', 'alias:{%s}' % alias) or b'').decode().split(' ')[0]
        if holder != eid:
            problems.append('%s: its alias %s is held by %r' % (eid, alias, holder))
    named_by = {}
    for eid, alias in alias_of.items():
        named_by.setdefault(alias, []).append(eid)
    for alias, eids in named_by.items():
        if len(eids) > 1:
            problems.append('alias %s is named by %d entities: %s' % (alias, len(eids),
                                                                     sorted(eids)))
    for alias, key in aliases.items():
        holder = (r.cli('GET', key) or b'').decode().split(' ')[0]
        if not (holder.startswith('c-') and len(holder) == 38):
            problems.append('alias %s holds %r' % (alias, holder))
    if versions is not None:
        problems.extend(versions.problems())
        if versions_durable:
            for eid in list(getattr(versions, 'seen', {})):
                top = versions.max_seen(eid)
                have = stored_v.get(eid)
                if top is not None and (have is None or have < top):
                    problems.append('%s: stored __v %r is below %d, seen in an answer' %
                                    (eid, have, top))
    return problems
