"""Session-wide hooks of the whole suite: an unexpected skip fails the run (tests/skip_policy.py says which skips are
expected, and why); under pytest-xdist (`make test` runs two workers) the tests that share a session resource run on
one worker (tests/xdist_groups.py)."""

from skip_policy import (  # noqa: F401  (pytest finds hooks by name in a conftest's namespace)
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from xdist_groups import pytest_collection_modifyitems  # noqa: F401
