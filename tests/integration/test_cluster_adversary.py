"""The hostile clients of test_adversary.py against a service in cluster mode on a local Redis
Cluster (rcluster.py): the same well-behaved checks, memory bounds, deadlines and invariants
afterwards (read across every primary). DEBUG SLEEP puts every primary to sleep at once."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'adversary'))
import harness  # noqa: E402
import rcluster  # noqa: E402
import test_adversary  # noqa: E402

setUpModule = test_adversary.setUpModule


class ClusterAdversaryTest(test_adversary.AdversaryTest):

    def start(self, env=None, quarantine_mb=None, debug_redis=False):
        r = rcluster.RedisCluster()
        self.addCleanup(r.kill)
        e = test_adversary.base_env(quarantine_mb)
        e.update(env or {})
        svc = self.entityd(redis=r, env=e)
        return r, svc, test_adversary.World(svc.port)


if __name__ == '__main__':
    harness.main()
