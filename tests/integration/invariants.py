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
- no key outside the documented shapes;
- with versions (an object with problems() and max_seen(eid), e.g. clients.VersionLog): no
  entity's __v was seen to go backwards during the run, and the stored __v is not below the
  highest one an answer showed (an acknowledged write was not lost).
"""

import json
import re

ADDRESS = re.compile(r'^0x[0-9a-f]{40}$')


ENTITY_FIELDS = {'id', 'name', 'description', 'contracts', 'twitter', 'discord', 'website',
                 'telegram', 'instagram', 'openseaSlug', 'imageURL', 'bannerURL',
                 'defaultDyNftThemeId', 'communityURLAlias', 'public', 'isEnabled', 'createdAt',
                 'modifiedAt', 'createdBy', '__v'}


def check_invariants(r, versions=None, versions_durable=True):
    """Every key of the data set (service/redis/keys.h), checked for the states whole writes leave.
    Returns a list of problems (empty when consistent)."""
    problems = []
    keys = [k.decode() for k in r.cli('KEYS', '*', timeout=30)]
    by_entity = {}
    aliases = {}
    for k in keys:
        if k.startswith('ent:{'):
            tag, _, rest = k[5:].partition('}')
            by_entity.setdefault(tag, {})[rest] = k
        elif k.startswith('alias:{'):
            aliases[k[7:-1]] = k
        elif not k.startswith('auth:revoked:'):
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

    alias_of = {}
    stored_v = {}
    for eid, parts in by_entity.items():
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
