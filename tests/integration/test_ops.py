"""Operations: /metrics (checked by promtool and against the traffic sent), JSON logs (fields,
levels, never a signature or a query string), the container image (Dockerfile, .dockerignore)
and the Kubernetes example manifest (deploy/kubernetes.yaml).

promtool comes from the Debian package prometheus; without it the promtool checks skip (every
other check runs)."""

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import REPO, RawConn, http_request_bytes as req_bytes, scaled  # noqa: E402

try:  # only to cross-check the small YAML reader below when PyYAML happens to be installed
    import yaml  # noqa: E402
except ImportError:  # pragma: no cover
    yaml = None

DOCKERFILE = os.path.join(REPO, 'Dockerfile')
DOCKERIGNORE = os.path.join(REPO, '.dockerignore')
MANIFEST = os.path.join(REPO, 'deploy', 'kubernetes.yaml')
README = os.path.join(REPO, 'README.md')
OPERATIONS = os.path.join(REPO, 'docs', 'OPERATIONS.md')
LIB_SH = os.path.join(REPO, 'scripts', 'lib.sh')

PROMTOOL = shutil.which('promtool')
NO_PROMTOOL = 'promtool not found: install the Debian package "prometheus"'

JSON_CT = {'Content-Type': 'application/json'}


def entity_body(owner):
    return {'name': 'Ops Guild', 'description': 'Operations', 'ownerAddresses': [owner],
            'twitter': '@ops', 'discord': '', 'website': 'https://ops.example', 'imageUrl': ''}

_wallets = []


def wallets(n):
    """n wallets from a pool made by one entityd-sign run."""
    if len(_wallets) < n:
        _wallets.extend(harness.Wallet.random(max(8, n)))
    return [_wallets.pop() for _ in range(n)]


def q(address=None, signature=None, **extra):
    return harness.auth_query(address, signature, **extra)


# --------------------------------------------------------------------------------------------
# Prometheus text format

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_metrics(text):
    """{(name, frozenset of (label, value)): float} and {family: type}."""
    samples, types = {}, {}
    for line in text.split('\n'):
        if not line.strip():
            continue
        if line.startswith('#'):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == 'TYPE':
                types[parts[2]] = parts[3].strip()
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError('unparsable metrics line %r' % line)
        labels = {}
        rest = m.group(2) or ''
        pos = 0
        while pos < len(rest):
            lm = _LABEL.match(rest, pos)
            if not lm:
                raise AssertionError('unparsable labels in %r' % line)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        key = (m.group(1), frozenset(labels.items()))
        if key in samples:
            raise AssertionError('duplicate sample %r' % line)
        samples[key] = float(m.group(3))
    return samples, types


class Metrics:
    def __init__(self, text):
        self.text = text
        self.samples, self.types = parse_metrics(text)

    def get(self, name, **labels):
        """The sample's value; 0 when absent (counters of label sets never hit are omitted)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name, **labels):
        return (name, frozenset(labels.items())) in self.samples

    def series(self, name):
        return {k[1]: v for k, v in self.samples.items() if k[0] == name}


def scrape(port):
    st, headers, body = harness.request(port, 'GET', '/metrics')
    assert st == 200, (st, body)
    assert isinstance(body, bytes), body
    return Metrics(body.decode('utf-8')), headers


def promtool_check(text):
    """(exit code, output) of `promtool check metrics` on text."""
    p = subprocess.run([PROMTOOL, 'check', 'metrics'], input=text.encode(), capture_output=True,
                       timeout=60)
    return p.returncode, (p.stdout + p.stderr).decode(errors='replace')


# --------------------------------------------------------------------------------------------
# Dockerfile, .dockerignore

def dockerfile_instructions(text):
    """[(INSTRUCTION, arguments)] with line continuations joined and comments dropped."""
    out, cur = [], ''
    for raw in text.split('\n'):
        line = raw.strip()
        if not cur and (not line or line.startswith('#')):
            continue
        if cur and line.startswith('#'):
            continue  # a comment inside a continued instruction
        if line.endswith('\\'):
            cur += line[:-1] + ' '
            continue
        cur += line
        if cur.strip():
            word, _, rest = cur.strip().partition(' ')
            out.append((word.upper(), rest.strip()))
        cur = ''
    if cur.strip():
        word, _, rest = cur.strip().partition(' ')
        out.append((word.upper(), rest.strip()))
    return out


def dockerfile_stages(text):
    """[{'image', 'name', 'instructions'}] in order."""
    stages = []
    for ins, args in dockerfile_instructions(text):
        if ins == 'FROM':
            words = [w for w in args.split() if not w.startswith('--')]
            name = words[2] if len(words) >= 3 and words[1].upper() == 'AS' else None
            stages.append({'image': words[0], 'name': name, 'instructions': []})
        elif stages:
            stages[-1]['instructions'].append((ins, args))
    return stages


def apt_installed(stage):
    """Packages named by `apt-get install` in a stage's RUN instructions."""
    pkgs = []
    for ins, args in stage['instructions']:
        if ins != 'RUN':
            continue
        for segment in re.split(r'&&|\|\||;|\|', args):
            try:
                words = shlex.split(segment)
            except ValueError:
                continue
            for i, w in enumerate(words):
                if w in ('apt-get', 'apt') and 'install' in words[i + 1:]:
                    j = words.index('install', i + 1)
                    pkgs += [x.split('=')[0] for x in words[j + 1:] if not x.startswith('-')]
    return pkgs


def base_image(image):
    """'debian:bookworm' from 'debian:bookworm@sha256:…' or 'docker.io/library/debian:…'."""
    image = image.split('@')[0]
    for prefix in ('docker.io/library/', 'docker.io/', 'library/'):
        if image.startswith(prefix):
            image = image[len(prefix):]
    return image


def _ignore_regex(pattern):
    """A .dockerignore pattern (Go filepath.Match plus **) as a regex on a relative path."""
    p = pattern.strip().strip('/')
    if p.startswith('./'):
        p = p[2:]
    out, i = '', 0
    while i < len(p):
        if p.startswith('**/', i):
            out += '(?:.*/)?'
            i += 3
        elif p.startswith('**', i):
            out += '.*'
            i += 2
        elif p[i] == '*':
            out += '[^/]*'
            i += 1
        elif p[i] == '?':
            out += '[^/]'
            i += 1
        else:
            out += re.escape(p[i])
            i += 1
    return re.compile('^' + out + '$')


def dockerignore_rules(text):
    rules = []
    for line in text.split('\n'):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        neg = line.startswith('!')
        rules.append((neg, _ignore_regex(line[1:] if neg else line)))
    return rules


def ignored(rules, relpath):
    """Docker's rule: the last matching pattern decides; a path is also excluded when one of
    its parent directories matches."""
    parts = relpath.split('/')
    prefixes = ['/'.join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for neg, rx in rules:
        if any(rx.match(p) for p in prefixes):
            result = not neg
    return result


def copy_context(dest):
    """Copies the build context (the repository minus .dockerignore) to dest; returns the
    number of files."""
    with open(DOCKERIGNORE) as f:
        rules = dockerignore_rules(f.read())
    n = 0
    for root, dirs, files in os.walk(REPO):
        rel_root = os.path.relpath(root, REPO)
        rel_root = '' if rel_root == '.' else rel_root + '/'
        dirs[:] = [d for d in dirs if not ignored(rules, rel_root + d)]
        for fn in files:
            rel = rel_root + fn
            if ignored(rules, rel):
                continue
            src = os.path.join(REPO, rel)
            if not os.path.isfile(src):
                continue
            os.makedirs(os.path.join(dest, rel_root), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))
            n += 1
    return n


# --------------------------------------------------------------------------------------------
# shared libraries and their Debian packages

SANITIZER_LIB = re.compile(r'^lib(asan|ubsan|tsan|lsan|hwasan)\.so')


def ldd(path):
    """{soname: resolved path} of every shared library the loader maps for path."""
    p = subprocess.run(['ldd', path], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError('ldd %s failed: %s' % (path, p.stderr))
    libs = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if 'not found' in line:
            raise AssertionError('ldd %s: %s' % (path, line))
        m = re.match(r'^(\S+) => (/\S+) \(0x', line)
        if m:
            libs[m.group(1)] = m.group(2)
            continue
        m = re.match(r'^(/\S+) \(0x', line)  # the dynamic loader itself
        if m:
            libs[os.path.basename(m.group(1))] = m.group(1)
    return libs


def needed(path):
    p = subprocess.run(['readelf', '-d', path], capture_output=True, text=True, timeout=30)
    return set(re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', p.stdout))


def libraries_to_ship(binary):
    """{soname: path} the runtime image must provide: ldd's list, without a sanitizer build's
    runtimes (libasan, libubsan) and what only they pull in (libstdc++, libgcc_s, libm)."""
    libs = ldd(binary)
    direct = needed(binary)
    drop = set()
    for name, path in libs.items():
        if SANITIZER_LIB.match(name):
            drop.add(name)
            drop.update(n for n in ldd(path) if n not in direct)
    return {n: p for n, p in libs.items() if n not in drop}


def dpkg_owner(path):
    """The Debian packages owning path (usrmerge: tried as /lib/… and /usr/lib/…, and
    resolved)."""
    cands = []
    for p in (path, os.path.realpath(path)):
        cands.append(p)
        cands.append(p[4:] if p.startswith('/usr/') else '/usr' + p)
    for c in cands:
        r = subprocess.run(['dpkg', '-S', c], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            continue
        for line in r.stdout.splitlines():
            if line.startswith('diversion '):
                continue
            owners = line.split(': ', 1)[0]
            return {o.strip().split(':')[0] for o in owners.split(',')}
    return None


# --------------------------------------------------------------------------------------------
# a small reader for the block-style YAML subset the manifest uses (stdlib only)

def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in '"\'':
            quote = ch
        elif ch == '#' and (i == 0 or line[i - 1] in ' \t'):
            return line[:i]
    return line


def _split_flow(s):
    out, cur, quote = [], '', None
    for ch in s:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in '"\'':
            quote = ch
            cur += ch
        elif ch == ',':
            out.append(cur)
            cur = ''
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out]


def _scalar(s):
    s = s.strip()
    if s in ('', 'null', '~'):
        return None
    if s[0] == '"':
        return json.loads(s)
    if s[0] == "'":
        return s[1:-1].replace("''", "'")
    if s[0] == '[':
        inner = s[1:-1].strip()
        return [_scalar(x) for x in _split_flow(inner)] if inner else []
    if s == '{}':
        return {}
    if s in ('true', 'True'):
        return True
    if s in ('false', 'False'):
        return False
    if re.fullmatch(r'[-+]?\d+', s):
        return int(s)
    if re.fullmatch(r'[-+]?\d+\.\d*', s):
        return float(s)
    return s


_KEY = re.compile(r'^("[^"]*"|[^\s"\'\[{#-][^:]*|-[^\s:][^:]*):(?:\s+(.*))?$')


def _is_seq(text):
    return text == '-' or text.startswith('- ')


def _map(lines, i, indent):
    out = {}
    while i < len(lines) and lines[i][0] == indent and not _is_seq(lines[i][1]):
        m = _KEY.match(lines[i][1])
        if not m:
            raise ValueError('not a mapping entry: %r' % lines[i][1])
        key = _scalar(m.group(1)) if m.group(1).startswith('"') else m.group(1)
        if key in out:
            raise ValueError('duplicate key %r' % key)
        rest = m.group(2)
        i += 1
        if rest is None or rest == '':
            nxt = lines[i] if i < len(lines) else None
            if nxt and (nxt[0] > indent or (nxt[0] == indent and _is_seq(nxt[1]))):
                out[key], i = _block(lines, i, nxt[0])
            else:
                out[key] = None
        elif rest[0] in '|>&*!':
            raise ValueError('unsupported YAML (block scalar, anchor or tag): %r' % rest)
        else:
            out[key] = _scalar(rest)
    if i < len(lines) and lines[i][0] > indent:
        raise ValueError('unexpected indentation: %r' % lines[i][1])
    return out, i


def _seq(lines, i, indent):
    out = []
    while i < len(lines) and lines[i][0] == indent and _is_seq(lines[i][1]):
        text = lines[i][1]
        rest = text[1:].lstrip()
        if not rest:
            i += 1
            if i < len(lines) and lines[i][0] > indent:
                v, i = _block(lines, i, lines[i][0])
            else:
                v = None
        elif _KEY.match(rest) and not rest.startswith('"'):
            col = indent + len(text) - len(rest)
            lines[i] = (col, rest)
            v, i = _map(lines, i, col)
        else:
            v = _scalar(rest)
            i += 1
        out.append(v)
    return out, i


def _block(lines, i, indent):
    return _seq(lines, i, indent) if _is_seq(lines[i][1]) else _map(lines, i, indent)


def yaml_load_all(text):
    docs, cur = [], []
    for raw in text.split('\n'):
        if raw.rstrip() == '---':
            docs.append(cur)
            cur = []
            continue
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        lead = line[:len(line) - len(line.lstrip())]
        if '\t' in lead:
            raise ValueError('tab in indentation: %r' % raw)
        cur.append((len(lead), line.strip()))
    docs.append(cur)
    out = []
    for d in docs:
        if not d:
            continue
        v, i = _block(d, 0, d[0][0])
        if i != len(d):
            raise ValueError('unparsed YAML from %r' % (d[i],))
        out.append(v)
    return out


def quantity(s):
    """A Kubernetes quantity ('100m', '64Mi', '1') as a float."""
    s = str(s)
    suffixes = {'m': 1e-3, 'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'k': 1e3, 'M': 1e6,
                'G': 1e9}
    for suf, mul in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
        if s.endswith(suf):
            return float(s[:-len(suf)]) * mul
    return float(s)


def entityd_variables():
    """The environment variables `entityd --help` lists."""
    p = subprocess.run([harness.ENTITYD_BIN, '--help'], capture_output=True, text=True,
                       timeout=30)
    text = p.stdout + p.stderr
    names = set(re.findall(r'^\s*--[a-z0-9-]+\s+([A-Z][A-Z0-9_]+)\s', text, re.M))
    if 'UV_THREADPOOL_SIZE' in text:
        names.add('UV_THREADPOOL_SIZE')
    assert len(names) >= 10, text
    return names


def readme_section(title):
    with open(README) as f:
        text = f.read()
    i = text.find('\n## %s\n' % title)
    if i < 0:
        return None
    j = text.find('\n## ', i + 1)
    return text[i:] if j < 0 else text[i:j]


# --------------------------------------------------------------------------------------------
# an entityd on a chosen port: at LOG_LEVEL=warn the "listening" line the harness waits for is
# not written

class FixedPortEntityd(harness.Entityd):
    def __init__(self, *a, **kw):
        self.fixed_port = harness.free_port()
        super().__init__(*a, **kw)

    def env(self):
        e = super().env()
        e['PORT'] = str(self.fixed_port)
        return e

    def _listening_port(self):
        if self.proc.poll() is not None:
            raise RuntimeError('entityd exited with %s' % self.proc.returncode)
        return self.fixed_port if harness.port_open(self.fixed_port) else None


def log_lines(svc):
    """Every non-empty line of stdout and stderr, as (stream, text)."""
    out = [('stdout', l) for l in svc.stdout().split('\n') if l.strip()]
    out += [('stderr', l) for l in svc.stderr().split('\n') if l.strip()]
    return out


def records(svc):
    return [json.loads(l) for _, l in log_lines(svc)]


ISO_TIME = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$')
REQUEST_FIELDS = ('time', 'level', 'msg', 'request_id', 'method', 'route', 'status',
                  'duration_ms', 'caller')


# ============================================================================================
# /metrics

class MetricsTest(harness.ServiceTestCase):
    """One service, a known mix of traffic, then one scrape that every test reads."""

    HEALTHZ = 7
    NOT_FOUND = 5
    POST_HEALTHZ = 2
    CREATES = 2
    READS = 3
    MISMATCH = 3
    MALFORMED = 2
    MISSING = 1
    USERS_OK = 1

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r)
        port = cls.port = cls.svc.port
        a, b = wallets(2)
        msg, _ = harness.current_message(port)
        addr, sig = a.sign(msg)
        cls.before, _ = scrape(port)  # the readyz polls at start, and one /metrics

        for _ in range(cls.HEALTHZ):
            assert harness.request(port, 'GET', '/healthz')[0] == 200
        for i in range(cls.NOT_FOUND):
            st = harness.request(port, 'GET', '/no/such/path/%d?%s' % (i, q(addr, sig)))[0]
            assert st == 404, st
        for _ in range(cls.POST_HEALTHZ):
            assert harness.request(port, 'POST', '/healthz')[0] == 405
        ids = []
        for _ in range(cls.CREATES):
            st, _, body = harness.request(port, 'POST', '/api/entities?' + q(addr, sig),
                                          body=entity_body(addr))
            assert st == 201, (st, body)
            ids.append(body['data']['id'])
        eid = ids[0]
        for _ in range(cls.READS):
            st, _, body = harness.request(port, 'GET', '/api/entities/%s?%s' % (eid, q(addr, sig)))
            assert st == 200, (st, body)
        users = '/api/entities/%s/users?' % eid
        for _ in range(cls.USERS_OK):
            st, _, body = harness.request(port, 'GET', users + q(addr, sig))
            assert st == 200, (st, body)
        for _ in range(cls.MISMATCH):  # a's signature presented as b's
            st, _, body = harness.request(port, 'GET', users + q(b.address, sig))
            assert st == 401, (st, body)
        for _ in range(cls.MALFORMED):
            st, _, body = harness.request(port, 'GET', users + q(addr, '0x1234zz'))
            assert st == 401, (st, body)
        for _ in range(cls.MISSING):
            st, _, body = harness.request(port, 'GET', users + q(addr))
            assert st == 401, (st, body)
        cls.m, cls.headers = scrape(port)
        cls.entity_id = eid

    def test_promtool_accepts_the_exposition(self):
        if not PROMTOOL:
            self.skipTest(NO_PROMTOOL)
        for m in (self.before, self.m):
            rc, out = promtool_check(m.text)
            self.assertEqual((rc, out.strip()), (0, ''),
                             'promtool check metrics:\n%s\n--- exposition:\n%s' % (out, m.text))

    def test_content_type(self):
        self.assertTrue(self.headers['content-type'].startswith('text/plain; version=0.0.4'),
                        self.headers)
        self.assertIn('x-request-id', self.headers)

    def test_request_counters_match_the_traffic(self):
        m, req = self.m, 'entityd_http_requests_total'
        self.assertEqual(m.get(req, route='/healthz', method='GET', status='200'), self.HEALTHZ)
        self.assertEqual(m.get(req, route='unmatched', method='any', status='404'),
                         self.NOT_FOUND)
        self.assertEqual(m.get(req, route='/api/entities', method='POST', status='201'),
                         self.CREATES)
        self.assertEqual(m.get(req, route='/api/entities/{id}', method='GET', status='200'),
                         self.READS)
        self.assertEqual(m.get(req, route='/api/entities/{id}/users', method='GET', status='200'),
                         self.USERS_OK)
        self.assertEqual(m.get(req, route='/api/entities/{id}/users', method='GET', status='401'),
                         self.MISMATCH + self.MALFORMED + self.MISSING)
        # The 405s: counted once each, whatever labels the service gives a method mismatch.
        total_405 = sum(v for labels, v in m.series(req).items()
                        if dict(labels)['status'] == '405')
        self.assertEqual(total_405, self.POST_HEALTHZ)
        # The previous scrape is counted (a scrape's own request is counted after it renders).
        self.assertEqual(m.get(req, route='/metrics', method='GET', status='200'), 1)
        # Labels: route templates only (never a concrete id or a query), known statuses.
        for labels in m.series(req):
            d = dict(labels)
            self.assertEqual(set(d), {'route', 'method', 'status'}, d)
            self.assertTrue(d['route'] == 'unmatched' or d['route'].startswith('/'), d)
            self.assertNotIn('?', d['route'])
            self.assertNotIn(self.entity_id, d['route'])
            self.assertTrue(d['status'].isdigit() or d['status'] == 'other', d)

    def test_signature_counters(self):
        m, sc = self.m, 'entityd_auth_signature_checks_total'
        ok = self.CREATES + self.READS + self.USERS_OK
        self.assertEqual(m.get(sc, outcome='ok'), ok)
        self.assertEqual(m.get(sc, outcome='mismatch'), self.MISMATCH)
        self.assertEqual(m.get(sc, outcome='malformed'), self.MALFORMED)
        self.assertEqual(m.get(sc, outcome='missing'), self.MISSING)
        self.assertEqual(m.get(sc, outcome='expired'), 0)
        self.assertEqual(m.get(sc, outcome='revoked'), 0)
        # One signature: recovered once, then answered from the cache; each mismatch (another
        # address) is recovered again.
        self.assertEqual(m.get('entityd_auth_cache_hits_total'), ok - 1)
        self.assertEqual(m.get('entityd_auth_recoveries_total'), 1 + self.MISMATCH)
        self.assertEqual(m.get('entityd_auth_threadpool_queue_depth'), 0)

    def test_latency_histogram_is_consistent(self):
        m, h = self.m, 'entityd_http_request_duration_seconds'
        self.assertEqual(m.types.get(h), 'histogram')
        self.assertEqual(m.get(h + '_count', route='/healthz', method='GET'), self.HEALTHZ)
        self.assertEqual(m.get(h + '_count', route='/api/entities/{id}', method='GET'),
                         self.READS)
        counts = m.series(h + '_count')
        self.assertTrue(counts)
        for labels, count in counts.items():
            buckets = sorted(((float(dict(l)['le']), v)
                              for l, v in m.series(h + '_bucket').items()
                              if {k: x for k, x in l if k != 'le'} == dict(labels)),
                             key=lambda b: b[0])
            self.assertEqual(buckets[-1], (math.inf, count), dict(labels))
            values = [v for _, v in buckets]
            self.assertEqual(values, sorted(values), 'buckets not cumulative: %r' % buckets)
            total = m.samples[(h + '_sum', labels)]
            self.assertGreaterEqual(total, 0)
            self.assertLess(total, count * scaled(5))
        # Requests equal histogram counts, route by route.
        req = {}
        for labels, v in m.series('entityd_http_requests_total').items():
            d = dict(labels)
            req[(d['route'], d['method'])] = req.get((d['route'], d['method']), 0) + v
        hist = {(dict(l)['route'], dict(l)['method']): v for l, v in counts.items()}
        self.assertEqual(req, hist)

    def test_connection_and_redis_gauges(self):
        m = self.m
        self.assertEqual(m.get('entityd_redis_connected'), 1)
        self.assertGreaterEqual(m.get('entityd_http_connections_open'), 1)  # the scrape's own
        # Every request above was on a connection of its own.
        sent = (self.HEALTHZ + self.NOT_FOUND + self.POST_HEALTHZ + self.CREATES + self.READS +
                self.USERS_OK + self.MISMATCH + self.MALFORMED + self.MISSING)
        self.assertGreaterEqual(m.get('entityd_http_connections_total') -
                                self.before.get('entityd_http_connections_total'), sent)
        self.assertEqual(m.get('entityd_http_connections_rejected_total'), 0)
        self.assertGreater(m.get('entityd_redis_commands_total'),
                           self.before.get('entityd_redis_commands_total'))
        self.assertEqual(m.get('entityd_redis_timeouts_total'), 0)
        self.assertEqual(m.get('entityd_redis_disconnects_total'), 0)
        self.assertGreaterEqual(m.get('entityd_redis_connects_total'), 1)
        self.assertEqual(m.get('entityd_build_info', version=self.version()), 1)

    def version(self):
        p = subprocess.run([harness.ENTITYD_BIN, '--version'], capture_output=True, text=True,
                           timeout=30)
        return p.stdout.split()[-1]

    def test_counters_agree_with_the_request_log(self):
        """Every request line in the log is counted under its route and status (the scrapes
        themselves aside: a scrape is counted after it renders)."""
        from_metrics = {}
        for labels, v in self.m.series('entityd_http_requests_total').items():
            d = dict(labels)
            if d['route'] == '/metrics':
                continue
            key = ('-' if d['route'] == 'unmatched' else d['route'], d['status'])
            from_metrics[key] = from_metrics.get(key, 0) + v

        def from_log():
            counts = {}
            for rec in self.svc.logs():
                if rec.get('msg') == 'request' and rec.get('route') != '/metrics':
                    key = (rec['route'], str(rec['status']))
                    counts[key] = counts.get(key, 0) + 1
            return counts
        # Lines are flushed by a 200 ms timer.
        try:
            harness.wait_for(lambda: from_log() == from_metrics, scaled(3), interval=0.05,
                             what='request log lines to match the counters')
        except TimeoutError:
            self.assertEqual(from_log(), from_metrics)

    def test_operations_guide_lists_every_metric(self):
        with open(OPERATIONS) as f:
            guide = f.read()
        for family in self.m.types:
            self.assertIn(family, guide, 'metric %s is not described in docs/OPERATIONS.md' % family)


class MetricsRedisTest(harness.ServiceTestCase):
    """Redis gauges and counters through an outage and a stall."""

    def wait_metric(self, port, pred, what, timeout):
        return harness.wait_for(lambda: (lambda m: m if pred(m) else None)(scrape(port)[0]),
                                timeout, interval=0.05, what=what)

    def test_redis_killed_then_restarted(self):
        r = self.redis()
        svc = self.entityd(redis=r)
        (a,) = wallets(1)
        creds = q(*a.sign(harness.current_message(svc.port)[0]))
        body = entity_body(a.address)
        r.kill()
        m = self.wait_metric(svc.port, lambda m: m.get('entityd_redis_connected') == 0,
                             'entityd_redis_connected 0 after the kill', scaled(3))
        self.assertGreaterEqual(m.get('entityd_redis_disconnects_total'), 1)
        st, _, resp = svc.request('POST', '/api/entities?' + creds, body=body)
        self.assertEqual(st, 503, resp)
        st, _, _ = svc.request('GET', '/readyz')
        self.assertEqual(st, 503)
        m, _ = scrape(svc.port)
        req = 'entityd_http_requests_total'
        self.assertEqual(m.get(req, route='/api/entities', method='POST', status='503'), 1)
        self.assertGreaterEqual(m.get(req, route='/readyz', method='GET', status='503'), 1)
        if PROMTOOL:
            rc, out = promtool_check(m.text)
            self.assertEqual((rc, out.strip()), (0, ''), out)

        r.restart()
        m = self.wait_metric(svc.port, lambda m: m.get('entityd_redis_connected') == 1,
                             'entityd_redis_connected 1 after the restart', scaled(8))
        self.assertGreaterEqual(m.get('entityd_redis_connects_total'), 2)
        self.assertGreaterEqual(m.get('entityd_redis_disconnects_total'), 1)

    def test_redis_stalled_counts_timeouts(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': 1000})
        (a,) = wallets(1)
        creds = q(*a.sign(harness.current_message(svc.port)[0]))
        r.pause()
        try:
            st, _, body = svc.request('POST', '/api/entities?' + creds,
                                      body=entity_body(a.address), timeout=scaled(10))
        finally:
            r.resume()
        self.assertEqual(st, 504, body)
        m, _ = scrape(svc.port)
        self.assertGreaterEqual(m.get('entityd_redis_timeouts_total'), 1)
        self.assertEqual(m.get('entityd_http_requests_total', route='/api/entities',
                               method='POST', status='504'), 1)
        harness.wait_for(svc.ready, scaled(8), interval=0.05, what='/readyz 200 after resume')


# ============================================================================================
# logs

class LogTest(harness.ServiceTestCase):

    def assertLinesClean(self, svc, forbidden):
        """Every stdout/stderr line is a JSON object with time/level/msg; request lines carry
        the contract's fields; no line holds a forbidden string, "signature=" or "?"."""
        lines = log_lines(svc)
        self.assertTrue(lines)
        forbidden = [f.lower() for f in forbidden if f]
        for stream, line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                self.fail('%s line is not JSON: %r' % (stream, line))
            self.assertIsInstance(rec, dict, line)
            self.assertRegex(rec.get('time', ''), ISO_TIME, line)
            self.assertIn(rec.get('level'), ('debug', 'info', 'warn', 'error'), line)
            self.assertIsInstance(rec.get('msg'), str, line)
            low = line.lower()
            self.assertNotIn('signature=', low, line)
            self.assertNotIn('?', line)
            for f in forbidden:
                self.assertNotIn(f, low, 'a secret in the log: %r' % line)
            if rec['msg'] == 'request':
                for k in REQUEST_FIELDS:
                    self.assertIn(k, rec, line)
                self.assertIsInstance(rec['status'], int, line)
                self.assertIsInstance(rec['duration_ms'], (int, float), line)
                self.assertGreaterEqual(rec['duration_ms'], 0, line)
                self.assertTrue(rec['request_id'], line)
                self.assertTrue(rec['route'] == '-' or rec['route'].startswith('/'), line)
                self.assertEqual(rec['level'], 'error' if rec['status'] >= 500 else 'info', line)
                if rec['caller'] is not None:
                    self.assertRegex(rec['caller'], r'^0x[0-9a-f]{40}$', line)

    def assertExitedCleanly(self, svc, rc):
        self.assertEqual(rc, 0, 'entityd exited %s on SIGTERM; stderr:\n%s' %
                         (rc, svc.stderr()[-2000:]))

    def secrets(self, extra=()):
        """Every signature issued in this process (whole, and its r and s halves)."""
        out = list(extra)
        for sig in harness.ISSUED_SIGNATURES:
            out += [sig, sig[:64], sig[64:128]]
        return [s for s in out if len(s) >= 16]

    def test_no_signature_or_query_string_is_ever_logged(self):
        password = 'ops-redis-password-7d41c2'
        r = self.redis(password=password)
        svc = self.entityd(redis=r, env={'LOG_LEVEL': 'debug'})
        port = svc.port
        a, b = wallets(2)
        msg, _ = harness.current_message(port)
        addr, sig = a.sign(msg)
        _, compact = a.sign(msg, compact=True)
        _, v01 = a.sign(msg, v01=True)
        _, revocable = b.sign(msg)
        bogus = '0x' + 'ab' * 64  # 64 bytes: malformed (wrong length), still hex
        bad_s = '0x' + 'cd' * 65  # 65 bytes of hex that recover to nothing useful
        extra = [bogus[2:], bad_s[2:], password, harness.TEST_SECRET]

        def rq(method, path, body=None, rid=None, expect=None):
            headers = dict(JSON_CT) if body is not None else {}
            if rid:
                headers['X-Request-Id'] = rid
            st, h, resp = svc.request(method, path, body=body, headers=headers)
            if expect is not None:
                self.assertEqual(st, expect, (method, path, resp))
            return st, h, resp

        st, _, body = rq('POST', '/api/entities?' + q(addr, sig), entity_body(addr), expect=201)
        eid = body['data']['id']
        rq('GET', '/api/entities/%s?%s' % (eid, q(addr, sig)), expect=200)
        rq('GET', '/api/entities/%s?%s' % (eid, q(addr, compact)), expect=200)
        rq('GET', '/api/entities/%s?%s' % (eid, q(addr, v01)), expect=200)
        rq('GET', '/api/entities/%s?%s' % (eid, q(addr.upper().replace('0X', '0x'), sig)))
        rq('GET', '/api/entities/%s/users?%s&limit=5' % (eid, q(addr, sig)), expect=200)
        rq('GET', '/api/entities/%s/users?%s' % (eid, q(b.address, sig)), expect=401)
        rq('GET', '/api/entities/%s/users?%s' % (eid, q(addr, bogus)), expect=401)
        rq('GET', '/api/entities/%s/users?%s' % (eid, q(addr, bad_s)), expect=401)
        rq('GET', '/api/entities/%s/users?signature=%s' % (eid, sig))
        rq('GET', '/api/skills?entityID=%s&%s' % (eid, q(addr, sig)))
        rq('POST', '/api/entities/%s/levels/lv-1/update?signature=%s' % (eid, sig), {'x': 1})
        rq('POST', '/api/entities/%s/force-add?%s' % (eid, q(addr, sig)),
           {'addresses': [b.address], 'Chain': 'eth'}, expect=200)
        rq('POST', '/api/auth/revoke?' + q(b.address, revocable), expect=200)
        rq('POST', '/api/auth/revoke?' + q(b.address, revocable), expect=401)  # revoked
        # 404, 405 and odd paths, all with signatures in the query or the path.
        rq('GET', '/api/nothing/here?%s&x=%%3F' % q(addr, sig), expect=404)
        rq('GET', '/%s?signature=%s' % (sig[2:], sig), expect=404)
        rq('GET', '/api/entities/%s?%s' % (sig, q(addr, sig)))
        rq('GET', '/api/entities/%%3Fsignature%%3D%s' % sig)
        rq('DELETE', '/healthz?signature=%s' % sig, expect=405)
        rq('GET', '/healthz?signature=%s&address=%s' % (sig, addr), rid='ops-log-qs', expect=200)
        rq('POST', '/api/entities?' + q(addr, sig), 'not json', expect=None)
        rq('POST', '/api/entities?' + q(addr, sig), {'name': 1}, expect=None)

        # Malformed requests straight on the socket, signatures in their request lines.
        raw = [
            b'GET /x?signature=' + sig.encode() + b' HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
            b'BREW /?signature=' + sig.encode() + b' HTTP/1.1\r\nHost: x\r\n\r\n',
            b'GET /a b?signature=' + sig.encode() + b' HTTP/1.1\r\nHost: x\r\n\r\n',
            b'GET /api/entities?signature=' + sig.encode() + b'&pad=' + b'a' * 20000 +
            b' HTTP/1.1\r\nHost: x\r\n\r\n',
            req_bytes('GET', '/healthz?signature=' + sig, {'X-Big': 'v' * 70000}),
            req_bytes('POST', '/api/entities?' + q(addr, sig),
                      {'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked'}) +
            b'zz\r\n{}\r\n0\r\n\r\n',
            req_bytes('POST', '/api/entities?' + q(addr, sig),
                      {'Content-Type': 'application/json', 'Content-Length': '2',
                       'Transfer-Encoding': 'chunked'}) + b'2\r\n{}\r\n0\r\n\r\n',
            b'GET /healthz?signature=' + sig.encode() + b' HTTP/1.0\r\n\r\n',
            b'GET /api/entities/' + eid.encode() + b'?signature=' + sig.encode() +
            b' HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
        ]
        for data in raw:
            with RawConn(port, timeout=scaled(5)) as c:
                try:
                    c.send(data)
                    c.read_response(timeout=scaled(5))
                except (OSError, ConnectionError):
                    pass  # closed without an answer is acceptable here; logging is the point
        self.assertTrue(svc.ready())

        # Redis down: 503 lines at level error with the request id.
        r.kill()
        harness.wait_for(lambda: not svc.ready(), scaled(3), what='/readyz 503')
        st, _, _ = rq('POST', '/api/entities?' + q(addr, sig), entity_body(addr),
                      rid='ops-log-503')
        self.assertEqual(st, 503)
        rq('GET', '/readyz?signature=%s' % sig, rid='ops-log-ready', expect=503)
        # At debug, the reconnect attempts are logged too: let some be scanned (whether they
        # come is test_debug_logs_more_than_info's business).
        try:
            harness.wait_for(lambda: any(rec.get('level') == 'debug' for rec in svc.logs()),
                             scaled(3), what='a debug line while Redis is down')
        except TimeoutError:
            pass
        rc = svc.stop()

        self.assertLinesClean(svc, self.secrets(extra))
        recs = records(svc)
        by_id = {rec.get('request_id'): rec for rec in recs if rec.get('msg') == 'request'}
        self.assertEqual(by_id['ops-log-qs']['route'], '/healthz')
        self.assertEqual(by_id['ops-log-qs']['caller'], None)
        for rid, route in (('ops-log-503', '/api/entities'), ('ops-log-ready', '/readyz')):
            rec = by_id.get(rid)
            self.assertIsNotNone(rec, 'no request line for %s' % rid)
            self.assertEqual((rec['level'], rec['status'], rec['route']), ('error', 503, route))
        created = [rec for rec in recs if rec.get('msg') == 'request' and rec['status'] == 201]
        self.assertEqual([rec['caller'] for rec in created], [addr])
        self.assertEqual(created[0]['route'], '/api/entities')
        self.assertEqual(created[0]['method'], 'POST')
        # Entity routes are logged as templates, never with the id.
        for rec in recs:
            self.assertNotIn(eid, json.dumps(rec))
        self.assertExitedCleanly(svc, rc)

    def test_rejected_requests_log_their_method(self):
        """A GET refused while it is parsed (414, 431, a malformed header) is logged with its
        method, or with none when it is unknown, never with another method."""
        r = self.redis()
        svc = self.entityd(redis=r)
        raw = [
            b'GET /healthz?pad=' + b'a' * 20000 + b' HTTP/1.1\r\nHost: x\r\n\r\n',
            req_bytes('GET', '/healthz', {'X-Big': 'v' * 70000}),
            b'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
        ]
        statuses = []
        for data in raw:
            with RawConn(svc.port, timeout=scaled(5)) as c:
                c.send(data)
                statuses.append(c.read_response(timeout=scaled(5)).status)
        self.assertEqual(statuses, [414, 431, 400])

        def refused():
            return [rec for rec in svc.logs()
                    if rec.get('msg') == 'request' and rec['status'] in (414, 431, 400)]
        harness.wait_for(lambda: len(refused()) == 3, scaled(3), what='three request lines')
        self.assertEqual([(rec['status'], rec['method']) for rec in refused()
                          if rec['method'] not in ('GET', None, '-')], [],
                         'GET requests logged under another method')

    def test_warn_level_has_no_request_lines(self):
        r = self.redis()
        svc = FixedPortEntityd(redis=r, env={'LOG_LEVEL': 'warn'})
        self._instances.append(svc)
        (a,) = wallets(1)
        addr, sig = a.sign(harness.current_message(svc.port)[0])
        self.assertEqual(svc.request('GET', '/healthz')[0], 200)
        self.assertEqual(svc.request('GET', '/nope?' + q(addr, sig))[0], 404)
        self.assertIn(svc.request('GET', '/api/entities/c-x/users?' + q(addr, '0x12'))[0],
                      (401, 404))
        r.kill()
        harness.wait_for(lambda: not svc.ready(), scaled(3), what='/readyz 503')
        st, _, _ = svc.request('POST', '/api/entities?' + q(addr, sig), body=entity_body(addr),
                               headers={'X-Request-Id': 'ops-warn-503'})
        self.assertEqual(st, 503)
        rc = svc.stop()
        self.assertLinesClean(svc, self.secrets())
        recs = records(svc)
        self.assertEqual([rec for rec in recs if rec['level'] in ('debug', 'info')], [])
        self.assertEqual([rec for rec in recs if rec['msg'] == 'request' and rec['status'] < 500],
                         [])
        self.assertIn('redis disconnected', [rec['msg'] for rec in recs if rec['level'] == 'warn'])
        errs = [rec for rec in recs if rec['msg'] == 'request']
        self.assertIn('ops-warn-503', [rec['request_id'] for rec in errs])
        for rec in errs:
            self.assertEqual((rec['level'], rec['status']), ('error', 503), rec)
        self.assertExitedCleanly(svc, rc)

    def test_debug_logs_more_than_info(self):
        dead = harness.free_port()  # nothing listens there: every connect attempt fails
        url = 'redis://127.0.0.1:%d/0' % dead
        dbg = self.entityd(env={'LOG_LEVEL': 'debug', 'REDIS_URL': url}, wait_ready=False)
        info = self.entityd(env={'LOG_LEVEL': 'info', 'REDIS_URL': url}, wait_ready=False)
        harness.wait_for(
            lambda: sum(rec.get('level') == 'debug' for rec in dbg.logs()) >= 2, scaled(8),
            what='two debug lines (failed Redis connects)')
        for svc in (dbg, info):
            st, _, body = svc.request('GET', '/readyz', headers={'X-Request-Id': 'ops-dbg'})
            self.assertEqual(st, 503, body)
        time.sleep(0.5)
        rcs = [svc.stop() for svc in (dbg, info)]
        for svc in (dbg, info):
            self.assertLinesClean(svc, self.secrets())
        self.assertEqual([rec for rec in records(info) if rec['level'] == 'debug'], [])
        for svc in (dbg, info):
            reqs = [rec for rec in records(svc) if rec['msg'] == 'request']
            self.assertEqual([(x['request_id'], x['level'], x['status']) for x in reqs],
                             [('ops-dbg', 'error', 503)])
        for svc, rc in zip((dbg, info), rcs):
            self.assertExitedCleanly(svc, rc)


# ============================================================================================
# container image

class ImageTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        with open(DOCKERFILE) as f:
            cls.dockerfile = f.read()
        cls.stages = dockerfile_stages(cls.dockerfile)
        cls.build = cls.stages[0] if cls.stages else None
        cls.runtime = cls.stages[-1] if cls.stages else None

    def runtime_instructions(self, name):
        return [args for ins, args in self.runtime['instructions'] if ins == name]

    def test_multi_stage_from_debian(self):
        self.assertGreaterEqual(len(self.stages), 2, 'the Dockerfile must be multi-stage')
        self.assertEqual(base_image(self.build['image']), 'debian:bookworm')
        self.assertTrue(self.build['name'], 'the build stage needs a name (FROM … AS build)')
        self.assertEqual(base_image(self.runtime['image']), 'debian:bookworm-slim')
        copies = [a for a in self.runtime_instructions('COPY')
                  if '--from=%s' % self.build['name'] in a]
        self.assertTrue(copies, 'the runtime stage copies nothing from the build stage')

    def test_runtime_user_port_signal_entrypoint(self):
        users = self.runtime_instructions('USER')
        self.assertTrue(users, 'the runtime stage sets no USER')
        user = users[-1].split(':')[0]
        # Numeric, so that Kubernetes' runAsNonRoot can check it without /etc/passwd.
        self.assertTrue(user.isdigit(), 'USER %r should be a numeric uid' % users[-1])
        self.assertNotEqual(int(user), 0)
        exposed = ' '.join(self.runtime_instructions('EXPOSE')).split()
        self.assertIn('8080', [p.split('/')[0] for p in exposed])
        self.assertEqual(self.runtime_instructions('STOPSIGNAL'), ['SIGTERM'])
        # Exec form: SIGTERM must reach entityd itself, not a /bin/sh -c wrapper.
        entry = (self.runtime_instructions('ENTRYPOINT') or self.runtime_instructions('CMD'))
        self.assertTrue(entry, 'no ENTRYPOINT or CMD')
        argv = json.loads(entry[-1])
        self.assertIsInstance(argv, list)
        self.assertTrue(argv[0].endswith('/entityd'), argv)

    def test_build_stage_installs_the_build_packages(self):
        with open(LIB_SH) as f:
            m = re.search(r'ENTITYD_BUILD_PKGS="([^"]*)"', f.read())
        self.assertIsNotNone(m, 'ENTITYD_BUILD_PKGS not found in scripts/lib.sh')
        missing = set(m.group(1).split()) - set(apt_installed(self.build))
        self.assertEqual(missing, set(), 'the build stage misses packages of scripts/lib.sh')

    def test_runtime_stage_is_lean(self):
        pkgs = apt_installed(self.runtime)
        self.assertTrue(pkgs)
        for p in pkgs:
            self.assertFalse(p.endswith('-dev') or p in ('build-essential', 'gcc', 'meson',
                                                         'ninja-build', 'pkg-config'),
                             'build tool %s in the runtime stage' % p)
            # Spelled as Debian spells it: installed here, where the service is built.
            r = subprocess.run(['dpkg-query', '-W', '-f=${Status}', p], capture_output=True,
                               text=True, timeout=30)
            self.assertIn('install ok installed', r.stdout, 'unknown package %r' % p)

    def assertRuntimeProvides(self, binary):
        runtime = set(apt_installed(self.runtime)) | {'libc6'}  # libc6: in the base image
        libs = libraries_to_ship(binary)
        self.assertIn('libuv.so.1', libs, libs)
        problems = []
        for soname, path in sorted(libs.items()):
            owners = dpkg_owner(path)
            if not owners:
                problems.append('%s (%s): no Debian package owns it' % (soname, path))
            elif not owners & runtime:
                problems.append('%s (%s) comes from %s, which the runtime stage does not '
                                'install' % (soname, path, ', '.join(sorted(owners))))
        self.assertEqual(problems, [], '\n'.join(problems))

    def test_runtime_stage_installs_every_linked_library(self):
        self.assertRuntimeProvides(harness.ENTITYD_BIN)

    def test_dockerignore(self):
        with open(DOCKERIGNORE) as f:
            rules = dockerignore_rules(f.read())
        for path in ('build', 'build-asan', 'build-release', 'build-asan/service/entityd',
                     '.data', '.data/redis/appendonly.aof', '.git', '.git/HEAD', 'node_modules',
                     'tests/fixtures/gen/node_modules', 'tests/fixtures/gen/node_modules/x.js',
                     'scripts/node_modules'):
            self.assertTrue(ignored(rules, path), '%s is not in .dockerignore' % path)
        # Nothing the meson project reads is left out.
        kept = ['meson.build', 'meson_options.txt']
        for top in ('deps', 'service', 'tests'):
            for root, dirs, files in os.walk(os.path.join(REPO, top)):
                dirs[:] = [d for d in dirs if d not in ('node_modules', '__pycache__')]
                kept += [os.path.relpath(os.path.join(root, f), REPO) for f in files
                         if not f.endswith('.pyc')]
        excluded = [p for p in kept if ignored(rules, p)]
        self.assertEqual(excluded, [], '.dockerignore drops files the build needs')

    def test_build_stage_commands_replay(self):
        """The build stage's commands (apt-get aside) on a copy of the build context give a
        binary whose libraries the runtime stage provides."""
        workdirs = [a for ins, a in self.build['instructions'] if ins == 'WORKDIR']
        workdir = workdirs[-1] if workdirs else '/'
        ctx = harness.tmpdir('context-')
        self.assertGreater(copy_context(ctx), 10)
        for ins, args in self.build['instructions']:
            if ins != 'RUN' or 'apt-get' in args:
                continue
            if args.startswith('['):
                argv = json.loads(args)
            else:
                argv = ['/bin/sh', '-c', args]
            # Niced: the other suites run alongside and some of them measure time.
            p = subprocess.run(['nice', '-n', '19'] + argv, cwd=ctx, capture_output=True,
                               text=True, timeout=240)
            self.assertEqual(p.returncode, 0, 'RUN %s\n%s%s' % (args, p.stdout[-4000:],
                                                               p.stderr[-4000:]))
        copies = [a.split() for a in self.runtime_instructions('COPY')
                  if '--from=%s' % self.build['name'] in a]
        src = [w for w in copies[0] if not w.startswith('--')][0]
        if src.startswith(workdir.rstrip('/') + '/'):
            src = src[len(workdir.rstrip('/')) + 1:]
        binary = os.path.join(ctx, src)
        self.assertTrue(os.access(binary, os.X_OK), '%s was not built' % src)
        self.assertRuntimeProvides(binary)
        p = subprocess.run([binary, '--version'], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith('entityd '), p.stdout)

    def test_healthcheck_command(self):
        checks = self.runtime_instructions('HEALTHCHECK')
        if not checks:
            self.skipTest('the Dockerfile has no HEALTHCHECK')
        cmd = checks[-1]
        argv = json.loads(cmd[cmd.index('CMD') + 3:].strip())
        r = self.redis()
        svc = self.entityd(redis=r)
        env = dict(os.environ, PORT=str(svc.port))
        p = subprocess.run(argv, env=env, capture_output=True, timeout=scaled(10))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(svc.stop(), 0)
        p = subprocess.run(argv, env=env, capture_output=True, timeout=scaled(10))
        self.assertNotEqual(p.returncode, 0)


# ============================================================================================
# Kubernetes manifest

class ManifestTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        with open(MANIFEST) as f:
            cls.text = f.read()
        cls.docs = [d for d in yaml_load_all(cls.text) if d]
        cls.by_kind = {}
        for d in cls.docs:
            cls.by_kind.setdefault(d['kind'], []).append(d)
        cls.deploy = cls.by_kind['Deployment'][0]
        cls.pod = cls.deploy['spec']['template']['spec']
        cls.container = cls.pod['containers'][0]
        cls.config = cls.by_kind['ConfigMap'][0]['data']

    def test_yaml_reader_agrees_with_pyyaml(self):
        if yaml is None:
            self.skipTest('PyYAML is not installed (the small reader alone is used)')
        self.assertEqual([d for d in yaml.safe_load_all(self.text) if d], self.docs)

    def test_objects(self):
        for kind in ('ConfigMap', 'Deployment', 'Service', 'PodDisruptionBudget'):
            self.assertIn(kind, self.by_kind)
        self.assertNotIn('Secret', self.by_kind, 'no secret material in the example manifest')
        labels = self.deploy['spec']['template']['metadata']['labels']
        sel = self.deploy['spec']['selector']['matchLabels']
        self.assertTrue(sel.items() <= labels.items())
        svc = self.by_kind['Service'][0]['spec']
        self.assertTrue(svc['selector'].items() <= labels.items())
        pdb = self.by_kind['PodDisruptionBudget'][0]['spec']
        self.assertTrue(pdb['selector']['matchLabels'].items() <= labels.items())
        self.assertGreaterEqual(self.deploy['spec']['replicas'], 2)

    def port_number(self, port):
        if isinstance(port, int):
            return port
        for p in self.container['ports']:
            if p.get('name') == port:
                return p['containerPort']
        self.fail('no container port named %r' % port)

    def test_ports_and_probes(self):
        self.assertIn(8080, [p['containerPort'] for p in self.container['ports']])
        live = self.container['livenessProbe']['httpGet']
        ready = self.container['readinessProbe']['httpGet']
        self.assertEqual(live['path'], '/healthz')
        self.assertEqual(ready['path'], '/readyz')
        self.assertEqual(self.port_number(live['port']), 8080)
        self.assertEqual(self.port_number(ready['port']), 8080)
        for p in self.by_kind['Service'][0]['spec']['ports']:
            self.assertEqual(self.port_number(p.get('targetPort', p['port'])), 8080)

    def prestop_seconds(self):
        pre = self.container.get('lifecycle', {}).get('preStop', {})
        if 'sleep' in pre:
            return int(pre['sleep']['seconds'])
        cmd = pre.get('exec', {}).get('command', [])
        self.assertEqual(cmd[:1], ['sleep'], 'preStop should sleep: %r' % pre)
        return int(cmd[1])

    def test_grace_period_covers_prestop_and_drain(self):
        pre = self.prestop_seconds()
        self.assertGreaterEqual(pre, 1)
        drain_ms = int(self.config.get('SHUTDOWN_TIMEOUT_MS', 10000))
        grace = self.pod['terminationGracePeriodSeconds']
        self.assertGreaterEqual(grace, pre + math.ceil(drain_ms / 1000) + 1,
                                'terminationGracePeriodSeconds must cover preStop + drain')

    def test_security_context(self):
        pod_sc = self.pod.get('securityContext', {})
        sc = self.container.get('securityContext', {})
        self.assertTrue(sc.get('runAsNonRoot', pod_sc.get('runAsNonRoot')))
        self.assertIs(sc.get('readOnlyRootFilesystem'), True)
        self.assertIs(sc.get('allowPrivilegeEscalation'), False)
        self.assertIn('ALL', sc.get('capabilities', {}).get('drop', []))
        self.assertFalse(sc.get('privileged', False))
        uid = sc.get('runAsUser', pod_sc.get('runAsUser'))
        if uid is not None:
            with open(DOCKERFILE) as f:
                users = [a for i, a in dockerfile_stages(f.read())[-1]['instructions']
                         if i == 'USER']
            self.assertEqual(str(uid), users[-1].split(':')[0],
                             'runAsUser differs from the image USER')

    def test_resources(self):
        res = self.container['resources']
        for k in ('cpu', 'memory'):
            self.assertIn(k, res['requests'])
            self.assertIn(k, res['limits'])
            self.assertLessEqual(quantity(res['requests'][k]), quantity(res['limits'][k]))
        self.assertGreaterEqual(quantity(res['limits']['memory']), 64 * 2 ** 20)
        self.assertLessEqual(quantity(res['limits']['memory']), 2 ** 30)

    def test_secrets_and_config(self):
        env = {e['name']: e for e in self.container.get('env', [])}
        self.assertIn('secretKeyRef', env['AUTH_SECRET'].get('valueFrom', {}))
        self.assertNotIn('AUTH_SECRET', self.config)
        self.assertIn('REDIS_URL', env)
        known = entityd_variables() | {'REDIS_ADDRESS', 'REDIS_PASSWORD'}
        for name in list(self.config) + list(env):
            self.assertIn(name, known, '%s is not an entityd setting' % name)

    def test_attester_key_from_a_secret(self):
        """The attester's key: a Secret mounted for the init container, which copies it with
        mode 0400 into a memory volume that entityd reads (ATTESTATION_KEY_FILE)."""
        env = {e['name']: e for e in self.container.get('env', [])}
        path = env['ATTESTATION_KEY_FILE']['value']
        vols = {v['name']: v for v in self.pod['volumes']}
        mounts = {m['name']: m for m in self.container['volumeMounts']}
        key_vol = [n for n, m in mounts.items() if path.startswith(m['mountPath'] + '/')]
        self.assertEqual(len(key_vol), 1, 'ATTESTATION_KEY_FILE is on no mounted volume')
        self.assertIs(mounts[key_vol[0]].get('readOnly'), True)
        self.assertEqual(vols[key_vol[0]]['emptyDir'].get('medium'), 'Memory')
        init = self.pod['initContainers'][0]
        cmd = init['command']
        self.assertEqual(cmd[:3], ['install', '-m', '0400'])
        self.assertEqual(cmd[-1], path)
        secret_vols = [v for v in self.pod['volumes'] if 'secret' in v]
        self.assertEqual(len(secret_vols), 1)
        sv = secret_vols[0]
        self.assertIn('defaultMode', sv['secret'])
        self.assertEqual(sv['secret']['defaultMode'] & 0o007, 0, 'others may read the Secret')
        init_mounts = {m['name']: m for m in init['volumeMounts']}
        self.assertTrue(cmd[3].startswith(init_mounts[sv['name']]['mountPath'] + '/'))
        self.assertEqual(self.pod['securityContext'].get('fsGroup'),
                         self.pod['securityContext'].get('runAsGroup'))
        self.assertIs(init['securityContext'].get('readOnlyRootFilesystem'), True)

    def kubelet_env(self, secrets, overrides):
        """The container environment as the kubelet builds it: envFrom first, then env in
        order with $(VAR) expanded from what is defined so far."""
        out = {}
        for src in self.container.get('envFrom', []):
            name = src['configMapRef']['name']
            cm = [d for d in self.by_kind['ConfigMap'] if d['metadata']['name'] == name]
            self.assertTrue(cm, 'ConfigMap %s is not in the manifest' % name)
            out.update({k: str(v) for k, v in cm[0]['data'].items()})
        out.update(overrides)
        for e in self.container.get('env', []):
            if 'value' in e:
                out[e['name']] = re.sub(r'\$\(([A-Za-z_][A-Za-z0-9_]*)\)',
                                        lambda m: out.get(m.group(1), m.group(0)),
                                        str(e['value']))
            elif 'secretKeyRef' in e.get('valueFrom', {}):
                out[e['name']] = secrets[e['valueFrom']['secretKeyRef']['key']]
            elif 'configMapKeyRef' in e.get('valueFrom', {}):
                out[e['name']] = self.config[e['valueFrom']['configMapKeyRef']['key']]
            out.update({k: v for k, v in overrides.items() if k == e['name']})
        return out

    def test_manifest_configuration_runs_the_service(self):
        """entityd starts with the manifest's settings, with and without a Redis password,
        answers the probes, and drains within the grace period."""
        grace = self.pod['terminationGracePeriodSeconds'] - self.prestop_seconds()
        for password in ('ops-manifest-pw-19ab', ''):
            r = self.redis(password=password or None)
            # the init container's copy of the attester's key: mode 0400
            key = os.path.join(harness.tmpdir('ops-key-'), 'key')
            with open(key, 'w') as f:
                f.write(os.urandom(32).hex() + '\n')
            os.chmod(key, 0o400)
            env = self.kubelet_env(
                {'AUTH_SECRET': harness.TEST_SECRET, 'REDIS_PASSWORD': password},
                {'REDIS_ADDRESS': '127.0.0.1:%d/0' % r.port, 'ATTESTATION_KEY_FILE': key})
            self.assertEqual(env['REDIS_URL'], 'redis://:%s@127.0.0.1:%d/0' % (password, r.port))
            for k in ('PORT', 'HOST'):  # loopback and a free port in tests
                env.pop(k, None)
            svc = self.entityd(env=env, secret=None)
            for probe in ('livenessProbe', 'readinessProbe'):
                path = self.container[probe]['httpGet']['path']
                self.assertEqual(svc.request('GET', path)[0], 200, path)
            self.assertEqual(svc.request('GET', '/api/attestations/config')[0], 200)
            t0 = time.monotonic()
            self.assertEqual(svc.stop(timeout=grace), 0)
            self.assertLess(time.monotonic() - t0, grace)
            self.assertNotIn(password or 'no-password', svc.stdout() + svc.stderr())

    def test_readme_points_to_the_manifest(self):
        section = readme_section('Running in production')
        self.assertIsNotNone(section)
        for s in ('deploy/kubernetes.yaml', 'docker build -t entityd .', '/metrics', '/readyz',
                  '/healthz', 'AUTH_SECRET', 'PLATFORM_ADMINS', 'REDIS_URL', 'LOG_LEVEL'):
            self.assertIn(s, section)


if __name__ == '__main__':
    harness.main()
