"""test_join_sweep.py's role-leaf class against a local Redis Cluster (rcluster.py): the
entity's keys (members, join:due, join:failing, join:lease, events) in its slot, the joins
registry in a slot of its own, every script on the entity's node. The killed instance's class
runs on one Redis only (test_join_sweep.py, both builds): its lease is the same key in the
same slot that every batch here takes and renews, and the takeover is the same script."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_join_sweep  # noqa: E402
from test_cluster_suite import OnCluster  # noqa: E402


class ClusterJoinSweepTest(OnCluster, test_join_sweep.JoinSweepTest):
    pass


if __name__ == '__main__':
    harness.main()
