"""Engine tests run against a real SLURM (started per session on 127.0.0.1) and a real Ray (inside a private network
namespace). The fixtures live in engine_fixtures.py so other suites (tests/contract) can use them too."""

from engine_fixtures import *  # noqa: F401,F403  (pytest fixtures: slurm_cluster, slurm_launcher_factory, ray_session, ...)
from slurm2 import *  # noqa: F401,F403  (two_node_manager, slurm_2node: a real 2-node SLURM in network namespaces)
