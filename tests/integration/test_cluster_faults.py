"""The fault suite of test_faults.py against a service in cluster mode on a local Redis Cluster
(rcluster.py): the whole cluster killed under load and started again (with appendonly and
appendfsync always on every node: no acknowledged write lost), down at start then up, entityd
killed mid-load, concurrent alias moves, slow and surplus clients, a signature flood; the
invariants read across every primary afterwards."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
import test_faults  # noqa: E402

setUpModule = test_faults.setUpModule


class ClusterFaultsTest(test_faults.FaultsTest):

    def redis(self, **kw):
        r = rcluster.RedisCluster(**kw)
        self.addCleanup(r.kill)
        return r

    @unittest.skip('the threadpool under a flood of signature checks, with a 200 ms p99 bound: '
                   'not a matter of the Redis mode, and six Redis servers on the same cores '
                   'make its timing bound a measure of the machine (test_faults.py keeps it)')
    def test_signature_flood_does_not_starve_unsigned_reads(self):
        pass


if __name__ == '__main__':
    harness.main()
