"""The reliability suites use the engines engineer's real SLURM fixture (tests/engines/engine_fixtures.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines"))  # engine_fixtures (real SLURM)

from engine_fixtures import slurm_cluster  # noqa: E402,F401
from slurm2 import slurm_2node, two_node_manager  # noqa: E402,F401  (the 2-node SLURM in network namespaces)
