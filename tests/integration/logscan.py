"""Log hygiene (CONTRACT section 13): no session token (`es_`), entity API key (`ek_`) or
65-byte signature (130 hex digits) in anything entityd writes.

The harness copies the stdout and stderr of every entityd it started into the directory named
by ENTITYD_TEST_LOG_DIR when its test process exits (support/base.py); scripts/test sets that
directory for the whole run and runs this file over it after the suites:

    python3 tests/integration/logscan.py DIR

It prints each finding (file, line number, the kind, never the secret itself) and exits 1 when
there is one, 0 otherwise. scan_text() is what tests use on one instance's output."""

import os
import re
import sys

# A token is es_/ek_ and 72 hex digits; 16 already tell one (or a cut one) from a word.
TOKEN = re.compile(r'\be[sk]_[0-9a-fA-F]{16,}')
SIGNATURE = re.compile(r'(?<![0-9a-fA-F])(0x)?[0-9a-fA-F]{130}(?![0-9a-fA-F])')


def scan_text(text):
    """[(line number, kind)] of every line of text holding a token or a signature."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if TOKEN.search(line):
            found.append((n, 'token'))
        if SIGNATURE.search(line):
            found.append((n, 'signature'))
    return found


def scan_dir(path):
    """(files scanned, [(file, line number, kind)])."""
    files = 0
    found = []
    for name in sorted(os.listdir(path)):
        p = os.path.join(path, name)
        if not os.path.isfile(p):
            continue
        files += 1
        with open(p, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
        found.extend((name, n, kind) for n, kind in scan_text(text))
    return files, found


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print('usage: logscan.py DIR', file=sys.stderr)
        return 2
    files, found = scan_dir(argv[1])
    for name, n, kind in found:
        print('%s:%d: a %s was logged' % (name, n, kind))
    print('log hygiene: %d log files scanned, %d findings' % (files, len(found)))
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
