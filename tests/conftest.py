"""Session-wide hooks of the whole suite: an unexpected skip fails the run (tests/skip_policy.py says which skips are
expected, and why); the `engines` marker and `--slurm-partition` (tests/site_cluster.py); under pytest-xdist (`make
test` runs two workers) the tests that share a session resource run on one worker (tests/xdist_groups.py)."""

import pytest
import site_cluster
import xdist_groups
from site_cluster import pytest_addoption, pytest_configure  # noqa: F401  (hooks, found by name)
from skip_policy import (  # noqa: F401  (pytest finds hooks by name in a conftest's namespace)
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the group marks into node-id suffixes
def pytest_collection_modifyitems(config, items) -> None:
    site_cluster.pytest_collection_modifyitems(config, items)  # engines marker; a site's partition deselects
    xdist_groups.assign_groups(items)


def pytest_collection_finish(session) -> None:
    xdist_groups.check_grouping(session)
