"""test_erase.py's classes against a local Redis Cluster (rcluster.py): the entity's keys in its
slot, the erasures set and the alias in theirs, each erasure step run on the primary holding
the entity, the SCAN of the test over every primary. ClusterEraseTest runs every test on a
cluster of 3 primaries and 3 replicas but the fault tests; ClusterEraseFaultTest runs the
fault tests (a delete whose answer is held, or whose link is cut, at the primary holding the
entity; the link cut at the alias release, in the alias's slot) on 3 primaries each behind a
RESP proxy (test_cluster_redis_faults.ProxiedCluster)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_erase  # noqa: E402
from test_cluster_redis_faults import ProxiedCluster  # noqa: E402
from test_cluster_suite import OnCluster  # noqa: E402


FAULT_TESTS = ('test_delete_with_unknown_outcome_retried',
               'test_alias_free_when_the_release_failed', 'test_record_outlives_a_lost_release')


class ClusterEraseTest(OnCluster, test_erase.EraseTest):
    test_delete_with_unknown_outcome_retried = None  # ClusterEraseFaultTest
    test_alias_free_when_the_release_failed = None
    test_record_outlives_a_lost_release = None


class ClusterEraseFaultTest(test_erase.EraseTest):

    @classmethod
    def class_redis(cls, **kw):
        cls.cluster = ProxiedCluster()
        return cls.cluster

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.cluster.close()


# The fault class runs the fault tests alone; the other class every other test.
for _name in dir(test_erase.EraseTest):
    if _name.startswith('test_') and _name not in FAULT_TESTS:
        setattr(ClusterEraseFaultTest, _name, None)


if __name__ == '__main__':
    harness.main()
