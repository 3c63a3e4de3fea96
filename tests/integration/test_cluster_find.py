"""test_find.py's classes against a local Redis Cluster (3 primaries, 3 replicas; rcluster.py):
every wallet's index, the directory and each entity in slots of their own, the backfill
scanning each primary; refused writes leaving no trace on any node (test_refused_writes.py);
and the API tests and the backfill again in Sentinel mode (1 primary, 1 replica, 3 sentinels)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
import test_cluster_suite  # noqa: E402
import test_find  # noqa: E402
import test_refused_writes  # noqa: E402


class ClusterFindTest(test_cluster_suite.OnCluster, test_find.FindTest):
    pass


class ClusterRefusedWritesTest(test_cluster_suite.OnCluster,
                               test_refused_writes.RefusedWritesTest):
    """Refused writes leave no trace when the wallet index and the directory live in other
    slots (and on other nodes) than the entity: every primary looked at."""


class OnSentinel:
    """A test class's Redis is a Sentinel set; the service asks the sentinels for the primary."""

    @classmethod
    def class_redis(cls, **kw):
        assert not kw, kw
        r = rcluster.SentinelSet()
        cls._class_redis = (cls._class_redis or []) + [r]
        return r


class SentinelFindTest(OnSentinel, test_find.FindTest):
    pass


class ClusterBackfillTest(test_find.BackfillTest):
    """The backfill SCANs each primary, its cursor per node."""

    def make_redis(self):
        r = rcluster.RedisCluster()
        self.addCleanup(r.kill)
        return r


class SentinelBackfillTest(test_find.BackfillTest):
    """The backfill against the primary the sentinels name, its cursor kept there."""

    def make_redis(self):
        r = rcluster.SentinelSet()
        self.addCleanup(r.kill)
        return r


if __name__ == '__main__':
    harness.main()
