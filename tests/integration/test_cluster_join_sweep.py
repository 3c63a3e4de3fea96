"""test_join_sweep.py's role-leaf classes against a local Redis Cluster (rcluster.py): the
entity's keys (members, join:due, join:failing, join:lease, events) in its slot, the joins
registry in a slot of its own, every script on the entity's node."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_join_sweep  # noqa: E402
from test_cluster_suite import OnCluster  # noqa: E402


class ClusterJoinSweepTest(OnCluster, test_join_sweep.JoinSweepTest):
    pass


class ClusterJoinSweepKillTest(OnCluster, test_join_sweep.JoinSweepKillTest):
    pass


if __name__ == '__main__':
    harness.main()
