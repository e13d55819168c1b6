"""Session-wide hooks of the whole suite: an unexpected skip fails the run (tests/skip_policy.py says which skips are
expected, and why); the `engines` marker and `--slurm-partition` (tests/site_cluster.py)."""

from site_cluster import (  # noqa: F401  (hooks, found by name)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
)
from skip_policy import (  # noqa: F401  (pytest finds hooks by name in a conftest's namespace)
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
