"""proto/openapi.yaml against the service's route table (service/resources/routes.c), stdlib only.

The document must list exactly the method+path pairs of the route table (path parameter names
may differ: `{id}` in the table is `{entityId}` in the document), and each operation's
`x-entityd-auth` and `security` must say what the route's auth mode does:

    AUTH_NONE     -> none      security: []
    AUTH_REQUIRED -> required  security: [{walletAddress, walletSignature}]
    AUTH_OPTIONAL -> optional  security: [{walletAddress, walletSignature}, {walletAddress}]
    AUTH_RECOVER  -> recover   security: [{walletAddress, walletSignature}, {walletSignature}]

and every mode but none also [{bearerAuth}, {cookieAuth}] (a session token, CONTRACT section
13), except on a route flagged ROUTE_SIGNATURE_ONLY, whose signature is its object.

The error code enum must equal the codes the service's C code answers with. The document is
read with a small reader for the block-style YAML subset it is written in (no PyYAML here);
the reader refuses what it does not understand rather than guess.
"""

import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROUTES_C = os.path.join(harness.REPO, 'service', 'resources', 'routes.c')
OPENAPI = os.path.join(harness.REPO, 'proto', 'openapi.yaml')
SERVICE_DIR = os.path.join(harness.REPO, 'service')

HTTP_METHODS = ('get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace')

AUTH_NAMES = {
    'AUTH_NONE': 'none',
    'AUTH_REQUIRED': 'required',
    'AUTH_OPTIONAL': 'optional',
    'AUTH_RECOVER': 'recover',
}

BOTH = frozenset(('walletAddress', 'walletSignature'))
EXPECTED_SECURITY = {
    'none': set(),
    'required': {BOTH},
    'optional': {BOTH, frozenset(('walletAddress',))},
    'recover': {BOTH, frozenset(('walletSignature',))},
}
SESSION_SCHEMES = {frozenset(('bearerAuth',)), frozenset(('cookieAuth',))}


def signature_only_routes():
    """(METHOD, normalized path) of the routes.c entries flagged ROUTE_SIGNATURE_ONLY."""
    with open(ROUTES_C, encoding='utf-8') as f:
        src = f.read()
    return {(meth, normalize(path)) for meth, path in re.findall(
        r'\{\s*HTTP_([A-Z]+)\s*,\s*"([^"]*)"[^}]*ROUTE_SIGNATURE_ONLY', src)}


# ------------------------------------------------------------------------------------------
# a reader for the YAML subset the document uses

class YamlSubsetError(ValueError):
    pass


def _scalar(text, lineno):
    """A plain or quoted scalar, or a one-line flow collection."""
    text = text.strip()
    if text.startswith('[') or text.startswith('{'):
        value, rest = _flow(text, 0, lineno)
        if text[rest:].strip():
            raise YamlSubsetError('line %d: text after a flow collection' % lineno)
        return value
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise YamlSubsetError('line %d: unterminated single-quoted scalar' % lineno)
        return text[1:-1].replace("''", "'")
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise YamlSubsetError('line %d: unterminated double-quoted scalar' % lineno)
        return _double_quoted(text[1:-1], lineno)
    text = re.sub(r'\s+#.*$', '', text)
    if text in ('null', '~', ''):
        return None
    if text == 'true':
        return True
    if text == 'false':
        return False
    if re.fullmatch(r'-?[0-9]+', text):
        return int(text)
    return text


def _double_quoted(body, lineno):
    escapes = {'n': '\n', 't': '\t', '"': '"', '\\': '\\', '/': '/', 'r': '\r', '0': '\0'}
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != '\\':
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in escapes:
            out.append(escapes[nxt])
            i += 2
        elif nxt in ('x', 'u'):
            n = 2 if nxt == 'x' else 4
            digits = body[i + 2:i + 2 + n]
            if not re.fullmatch(r'[0-9a-fA-F]{%d}' % n, digits):
                raise YamlSubsetError('line %d: bad \\%s escape' % (lineno, nxt))
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:
            raise YamlSubsetError('line %d: unsupported escape \\%s' % (lineno, nxt))
    return ''.join(out)


def _flow(text, pos, lineno):
    """Parses a flow sequence or mapping of plain or quoted scalars at text[pos]."""
    def skip(p):
        while p < len(text) and text[p] == ' ':
            p += 1
        return p

    def item(p):
        p = skip(p)
        if text[p] in '[{':
            return _flow(text, p, lineno)
        if text[p] in '\'"':
            q = text[p]
            end = text.index(q, p + 1)
            return _scalar(text[p:end + 1], lineno), end + 1
        m = re.compile(r'[^,\]}:]*').match(text, p)
        return _scalar(m.group(0), lineno), m.end()

    opener = text[pos]
    closer = ']' if opener == '[' else '}'
    out = [] if opener == '[' else {}
    p = skip(pos + 1)
    if p < len(text) and text[p] == closer:
        return out, p + 1
    while True:
        if opener == '[':
            v, p = item(p)
            out.append(v)
        else:
            k, p = item(p)
            p = skip(p)
            if p >= len(text) or text[p] != ':':
                raise YamlSubsetError('line %d: flow mapping without ":"' % lineno)
            v, p = item(p + 1)
            out[k] = v
        p = skip(p)
        if p >= len(text):
            raise YamlSubsetError('line %d: unterminated flow collection' % lineno)
        if text[p] == closer:
            return out, p + 1
        if text[p] != ',':
            raise YamlSubsetError('line %d: expected "," in a flow collection' % lineno)
        p += 1


_KEY = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s'"#\-\[\]{}][^:]*?|-[^\s:][^:]*?)"""
                  r""":(?:\s+(.*))?$""")


class _Reader:
    def __init__(self, text):
        self.lines = text.split('\n')
        self.i = 0

    def peek(self):
        """(indent, text, lineno) of the next content line, skipping blanks and comments."""
        while self.i < len(self.lines):
            raw = self.lines[self.i].rstrip()
            stripped = raw.lstrip(' ')
            if not stripped or stripped.startswith('#') or raw in ('---', '...'):
                self.i += 1
                continue
            if stripped.startswith('\t'):
                raise YamlSubsetError('line %d: tab in indentation' % (self.i + 1))
            return len(raw) - len(stripped), stripped, self.i + 1
        return None

    def node(self, indent):
        nxt = self.peek()
        if nxt[1] == '-' or nxt[1].startswith('- '):
            return self.sequence(indent)
        return self.mapping(indent)

    def value(self, rest, indent, lineno):
        """The value after "key:" (or "- key:") on a line whose block has this indent."""
        rest = (rest or '').strip()
        if rest.startswith('#'):
            rest = ''
        if rest and rest[0] in '|>':
            if not re.fullmatch(r'[|>][-+]?', rest):
                raise YamlSubsetError('line %d: unsupported block scalar header' % lineno)
            return self.block_scalar(indent, rest[0] == '>')
        if rest:
            return _scalar(rest, lineno)
        nxt = self.peek()
        if nxt is None:
            return None
        if nxt[0] > indent:
            return self.node(nxt[0])
        if nxt[0] == indent and (nxt[1] == '-' or nxt[1].startswith('- ')):
            return self.sequence(indent)
        return None

    def block_scalar(self, indent, folded):
        lines = []
        while self.i < len(self.lines):
            raw = self.lines[self.i].rstrip()
            if raw.strip() and len(raw) - len(raw.lstrip(' ')) <= indent:
                break
            lines.append(raw)
            self.i += 1
        while lines and not lines[-1].strip():
            lines.pop()
        body = [ln for ln in lines if ln.strip()]
        cut = min((len(ln) - len(ln.lstrip(' ')) for ln in body), default=0)
        text = [ln[cut:] for ln in lines]
        return (' ' if folded else '\n').join(text)

    def mapping(self, indent):
        out = {}
        while True:
            nxt = self.peek()
            if nxt is None or nxt[0] < indent:
                return out
            ind, text, lineno = nxt
            if ind > indent:
                raise YamlSubsetError('line %d: unexpected indentation' % lineno)
            if text == '-' or text.startswith('- '):
                return out
            m = _KEY.match(text)
            if not m:
                raise YamlSubsetError('line %d: not a "key: value" line: %r' % (lineno, text))
            key = _scalar(m.group(1), lineno)
            key = key if isinstance(key, str) else str(key)
            if key in out:
                raise YamlSubsetError('line %d: duplicate key %r' % (lineno, key))
            self.i += 1
            out[key] = self.value(m.group(2), indent, lineno)

    def sequence(self, indent):
        out = []
        while True:
            nxt = self.peek()
            if nxt is None or nxt[0] != indent or not (nxt[1] == '-' or nxt[1].startswith('- ')):
                return out
            _, text, lineno = nxt
            self.i += 1
            item = text[1:].lstrip(' ')
            col = indent + (len(text) - len(item))
            m = _KEY.match(item) if item and item[0] not in '[{\'"' else None
            if not item:
                out.append(self.value('', indent, lineno))
            elif m:
                first = _scalar(m.group(1), lineno)
                entry = {str(first): self.value(m.group(2), col, lineno)}
                nxt = self.peek()
                if nxt is not None and nxt[0] == col:
                    rest = self.mapping(col)
                    for k in rest:
                        if k in entry:
                            raise YamlSubsetError('line %d: duplicate key %r' % (lineno, k))
                    entry.update(rest)
                out.append(entry)
            else:
                out.append(_scalar(item, lineno))


def load_yaml_subset(text):
    r = _Reader(text)
    first = r.peek()
    if first is None:
        return None
    doc = r.node(first[0])
    left = r.peek()
    if left is not None:
        raise YamlSubsetError('line %d: unexpected text' % left[2])
    return doc


# ------------------------------------------------------------------------------------------
# the two sides

_ROUTE = re.compile(r'\{\s*HTTP_([A-Z]+)\s*,\s*"([^"]*)"\s*,\s*(\w+)\s*,\s*(AUTH_[A-Z]+)\s*'
                    r'(?:,\s*[\w|\s]+)?\}')


def parse_routes(source):
    """[(METHOD, normalized path, pattern, handler, auth)] from routes.c text."""
    m = re.search(r'router_routes\[\]\s*=\s*\{(.*?)\n\};', source, re.S)
    if not m:
        raise AssertionError('routes.c: no "router_routes[] = { ... };" table found')
    table = re.sub(r'/\*.*?\*/|//[^\n]*', '', m.group(1), flags=re.S)
    routes = [(meth, normalize(path), path, handler, auth)
              for meth, path, handler, auth in _ROUTE.findall(table)]
    entries = table.count('HTTP_')
    if entries != len(routes):
        raise AssertionError('routes.c: %d HTTP_ entries in the table but %d parsed; keep each '
                             'entry in the {HTTP_X, "/path", handler, AUTH_Y} form'
                             % (entries, len(routes)))
    return routes


def normalize(path):
    """A path with every {param} made anonymous, as the router matches them."""
    return re.sub(r'\{[^}/]*\}', '{}', path)


def load_document(text):
    doc = load_yaml_subset(text)
    if not isinstance(doc, dict) or not isinstance(doc.get('paths'), dict):
        raise AssertionError('openapi.yaml: no paths mapping')
    return doc


def document_operations(doc):
    """{(METHOD, normalized path): (path, operation)}."""
    ops = {}
    for path, item in doc['paths'].items():
        if not isinstance(item, dict):
            raise AssertionError('openapi.yaml: path %s is not a mapping' % path)
        for key, op in item.items():
            if key.lower() in HTTP_METHODS:
                k = (key.upper(), normalize(path))
                if k in ops:
                    raise AssertionError('openapi.yaml: %s %s twice' % k)
                ops[k] = (path, op)
    return ops


def security_sets(op):
    sec = op.get('security')
    if sec is None:
        return None
    return {frozenset(req.keys()) if isinstance(req, dict) else frozenset() for req in sec}


def compare(routes, ops):
    """Problems found comparing the route table with the document's operations."""
    problems = []
    signature_only = signature_only_routes()
    table = {(r[0], r[1]): r for r in routes}
    if len(table) != len(routes):
        problems.append('routes.c lists a method+path twice')
    for k in sorted(set(table) - set(ops)):
        problems.append('routes.c has %s %s but openapi.yaml does not' % (k[0], table[k][2]))
    for k in sorted(set(ops) - set(table)):
        problems.append('openapi.yaml has %s %s but routes.c does not' % (k[0], ops[k][0]))
    for k in sorted(set(table) & set(ops)):
        want = AUTH_NAMES.get(table[k][4])
        path, op = ops[k]
        where = '%s %s' % (k[0], path)
        if want is None:
            problems.append('%s: unknown auth mode %s in routes.c' % (where, table[k][4]))
            continue
        got = op.get('x-entityd-auth')
        if got != want:
            problems.append('%s: x-entityd-auth is %r, routes.c says %s (%s)'
                            % (where, got, want, table[k][4]))
        sec = security_sets(op)
        expected = EXPECTED_SECURITY[want]
        if want != 'none' and k not in signature_only:
            expected = expected | SESSION_SCHEMES
        if sec != expected:
            problems.append('%s: security %s does not match %s: expected %s'
                            % (where, sorted(map(sorted, sec)) if sec is not None else None,
                               want, sorted(map(sorted, expected))))
    return problems


_FAIL_CALL = re.compile(r'(?:request_fail|request_fail_retry|fail_with_headers)\s*\(\s*[^,()]+,\s*(\d{3})\s*,\s*'
                        r'"([a-z_]+)"')


def service_error_codes():
    """{code: {status}} from every request_fail-style call in the service's C sources."""
    codes = {}
    paths = sorted(os.path.join(d, n) for d, _, names in os.walk(SERVICE_DIR) for n in names)
    for path in paths:
        if not path.endswith('.c'):
            continue
        with open(path, encoding='utf-8') as f:
            src = f.read()
        for status, code in _FAIL_CALL.findall(src):
            codes.setdefault(code, set()).add(int(status))
        if 'request_fail_field(' in src:
            codes.setdefault('invalid_request', set()).add(400)
    return codes


# ------------------------------------------------------------------------------------------

class OpenApiMatchesRoutes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(ROUTES_C, encoding='utf-8') as f:
            cls.routes_src = f.read()
        with open(OPENAPI, encoding='utf-8') as f:
            cls.doc_src = f.read()
        cls.routes = parse_routes(cls.routes_src)
        cls.doc = load_document(cls.doc_src)
        cls.ops = document_operations(cls.doc)

    def test_document_is_openapi_3_1(self):
        self.assertRegex(str(self.doc.get('openapi')), r'^3\.1\.\d+$')
        self.assertIn('description', self.doc.get('info', {}))

    def test_route_table_parsed(self):
        self.assertGreaterEqual(len(self.routes), 10, 'routes.c: too few routes parsed')
        for meth, _, path, handler, auth in self.routes:
            self.assertTrue(path.startswith('/'), path)
            self.assertIn(auth, AUTH_NAMES, '%s %s' % (meth, path))

    def test_same_method_path_pairs_and_auth(self):
        problems = compare(self.routes, self.ops)
        self.assertEqual(problems, [], '\n' + '\n'.join(problems))

    def test_path_parameters_declared(self):
        params = self.doc.get('components', {}).get('parameters', {})

        def resolve(p):
            ref = p.get('$ref') if isinstance(p, dict) else None
            if ref:
                self.assertTrue(ref.startswith('#/components/parameters/'), ref)
                return params[ref.rsplit('/', 1)[1]]
            return p

        for path, item in self.doc['paths'].items():
            names = re.findall(r'\{([^}/]+)\}', path)
            shared = [resolve(p) for p in item.get('parameters') or []]
            for key, op in item.items():
                if key not in HTTP_METHODS:
                    continue
                declared = {p['name'] for p in shared + [resolve(p) for p in
                                                         op.get('parameters') or []]
                            if p.get('in') == 'path'}
                self.assertEqual(declared, set(names), '%s %s' % (key.upper(), path))

    def test_signed_routes_document_401(self):
        for (meth, _), (path, op) in self.ops.items():
            auth = op.get('x-entityd-auth')
            responses = {str(k) for k in (op.get('responses') or {})}
            where = '%s %s' % (meth, path)
            self.assertTrue(any(s.startswith('2') for s in responses), where)
            self.assertIn('500', responses, where)
            if auth == 'none' and op.get('x-entityd-credential') is None:
                self.assertNotIn('401', responses, where)
            elif auth == 'none':
                # A credential of its own (a signature in the body, a session token): 401 when
                # it fails, and said which.
                self.assertIn(op['x-entityd-credential'], ('body-signature', 'session-token'))
                self.assertIn('401', responses, where)
            else:
                self.assertIn('401', responses, where)
                self.assertIn('504', responses, where)

    def test_error_codes_match_the_service(self):
        enum = (self.doc.get('components', {}).get('schemas', {})
                .get('ErrorCode', {}).get('enum'))
        self.assertIsInstance(enum, list, 'components.schemas.ErrorCode.enum missing')
        used = service_error_codes()
        self.assertEqual(sorted(enum), sorted(used),
                         'ErrorCode enum differs from the codes in service/**/*.c')
        self.assertEqual(len(enum), len(set(enum)), 'ErrorCode enum repeats a code')

    def test_check_fails_when_a_route_is_added(self):
        """A route added to (a copy of) routes.c without the document is caught."""
        fake = '    {HTTP_PUT, "/api/entities/{id}/fake", entity_get, AUTH_REQUIRED},\n'
        src = self.routes_src.replace('\n};', '\n' + fake + '};', 1)
        with tempfile.NamedTemporaryFile('w', suffix='.c', delete=False) as f:
            f.write(src)
            copy = f.name
        try:
            with open(copy, encoding='utf-8') as f:
                routes = parse_routes(f.read())
        finally:
            os.unlink(copy)
        self.assertEqual(len(routes), len(self.routes) + 1)
        problems = compare(routes, self.ops)
        self.assertTrue(any('PUT /api/entities/{id}/fake' in p for p in problems), problems)

    def test_check_fails_on_wrong_auth(self):
        src = self.routes_src.replace('entity_get, AUTH_OPTIONAL', 'entity_get, AUTH_REQUIRED')
        self.assertNotEqual(src, self.routes_src, 'routes.c: entity_get is not AUTH_OPTIONAL')
        problems = compare(parse_routes(src), self.ops)
        self.assertTrue(any('x-entityd-auth' in p for p in problems), problems)


class YamlSubsetReader(unittest.TestCase):
    def test_reads_the_subset(self):
        doc = load_yaml_subset(
            "a: 1\n"
            "b:\n"
            "  - x\n"
            "  - k: 'it''s'\n"
            "    j: [p, {q: []}]\n"
            "c: |\n"
            "  line one\n"
            "\n"
            "  line: two # kept\n"
            "d: \"tab\\tnew\\nline\"\n"
            "'200':\n"
            "  e: true\n"
            "f:\n"
            "- y\n")
        self.assertEqual(doc, {
            'a': 1,
            'b': ['x', {'k': "it's", 'j': ['p', {'q': []}]}],
            'c': 'line one\n\nline: two # kept',
            'd': 'tab\tnew\nline',
            '200': {'e': True},
            'f': ['y'],
        })

    def test_refuses_what_it_does_not_know(self):
        with self.assertRaises(YamlSubsetError):
            load_yaml_subset("a: 1\n  b: 2\n")
        with self.assertRaises(YamlSubsetError):
            load_yaml_subset("a: 1\na: 2\n")
        with self.assertRaises(YamlSubsetError):
            load_yaml_subset("a: 'open\n")


if __name__ == '__main__':
    harness.main()
