"""The fault suite of test_faults.py against a service in cluster mode on a local Redis Cluster
(rcluster.py): the whole cluster killed under load and started again (with appendonly and
appendfsync always on every node: no acknowledged write lost), down at start then up, entityd
killed mid-load, concurrent alias moves, slow and surplus clients, a signature flood; the
invariants read across every primary afterwards."""

import os
import sys

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


if __name__ == '__main__':
    harness.main()
