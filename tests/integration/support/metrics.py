"""Readings of counters: the service's /metrics and Redis's command statistics."""

import re

from .base import scaled, wait_for
from .web import request


def commandstats(info):
    """{command: calls} from the text of a Redis INFO commandstats."""
    out = {}
    for line in info.splitlines():
        m = re.match(r'^cmdstat_([^:]+):calls=(\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def wait_still(look, changed, what):
    """Until two looks 0.2 s apart (look() a reading of Redis's counters) show no change
    (changed(before, after) false): the work a write sends beside its answer (CONTRACT
    section 9: index writes, drops) has landed and will not count in what comes next."""
    looks = []

    def settled():
        looks.append(look())
        return len(looks) > 1 and not changed(looks[-2], looks[-1])
    wait_for(settled, scaled(10), interval=0.2, what=what)


def _has_labels(key, labels):
    return all(('{%s="%s"' % kv) in key or (',%s="%s"' % kv) in key for kv in labels.items())


def sample(text, name, **labels):
    """A value of the exposition text `text` (str or bytes): `name` a family (its samples of
    every label set summed, or of those with the given labels) or one sample as printed
    (`family{label="value"}`); None when it has none (or the text is not a number there)."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    total, seen = 0.0, False
    for line in text.splitlines():
        key, _, value = line.rpartition(' ')
        if (key == name and not labels) or (key.startswith(name + '{') and '{' not in name and
                                             _has_labels(key, labels)):
            try:
                total, seen = total + float(value), True
            except ValueError:
                return None
    return total if seen else None


def metrics_text(where, timeout=None):
    """The service's /metrics text; where: a port or an instance with .port."""
    port = getattr(where, 'port', where)
    st, _, body = request(port, 'GET', '/metrics', timeout=timeout or scaled(10))
    assert st == 200, st
    return body if isinstance(body, str) else body.decode()


def metric(where, name, default=None, **labels):
    """sample() of the service's /metrics (where: a port or an instance with .port), or
    default when it has none."""
    v = sample(metrics_text(where), name, **labels)
    return default if v is None else v


def read_cache_metrics(port):
    """{name or name{labels}: value} of the entityd_read_cache_* samples."""
    st, _, body = request(port, 'GET', '/metrics')
    assert st == 200, st
    out = {}
    for line in body.decode().splitlines():
        if line.startswith('entityd_read_cache'):
            k, v = line.rsplit(' ', 1)
            out[k] = float(v)
    return out
