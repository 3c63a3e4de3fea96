"""test_erase.py's classes against a local Redis Cluster (3 primaries, 3 replicas; rcluster.py):
the entity's keys in its slot, the erasures set and the alias in theirs, each erasure step run
on the primary holding the entity, the SCAN of the test over every primary. The fault test with
the RESP proxy in front of one redis-server is skipped here."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_erase  # noqa: E402
from test_cluster_suite import OnCluster  # noqa: E402


class ClusterEraseTest(OnCluster, test_erase.EraseTest):
    pass


if __name__ == '__main__':
    harness.main()
