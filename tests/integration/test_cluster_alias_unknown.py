"""The unknown-outcome alias races of test_alias_unknown.py in cluster mode, on a cluster of
three primaries each behind a fault proxy and announcing it (test_cluster_redis_faults
.ProxiedCluster). Entity A's update meets the proxy of the primary holding A (a late script
after DEBUG SLEEP, a late answer, a dropped link) while the alias's claim lives on another
primary, which answered it: the claim must outlive the unknown outcome there, and only A's own
record or a known failure may free it. The invariants are read across every primary."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_alias_unknown  # noqa: E402
from test_alias_unknown import TIMEOUT_MS  # noqa: E402
from test_cluster_redis_faults import OnProxiedCluster  # noqa: E402


class ClusterAliasUnknownOutcomeTest(OnProxiedCluster, test_alias_unknown.AliasUnknownOutcomeTest):

    def start_redis(self):
        self.r = self.cluster
        self.r.reset()  # every proxy released and disarmed
        self.svc = self.entityd(redis=self.r, env={'REDIS_TIMEOUT_MS': TIMEOUT_MS,
                                                   'READ_CACHE_MB': '0'})

    def setUp(self):
        super().setUp()
        self.proxy = self.r.proxy_of(self.node_of_a())

    def node_of_a(self):
        return self.r.primary_of('ent:{%s}' % self.ea)

    def alias(self, prefix):
        # An alias whose claim another primary answers than the one A's update meets.
        a = self.node_of_a()
        for k in range(1000):
            name = '%s-%d-%d' % (prefix, os.getpid(), k)
            if self.r.primary_of('alias:{%s}' % name) is not a:
                return name
        raise AssertionError('no alias outside the slots of A\'s primary')


if __name__ == '__main__':
    harness.main()
