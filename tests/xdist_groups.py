"""Which tests must share a pytest-xdist worker (`make test` runs `-n 2 --dist loadgroup`).

A session-scoped resource is built once per worker, so every test that uses one goes to the same worker: the real
SLURM cluster(s) (tests/engines/engine_fixtures.py; two clusters would fight over ports and state dirs), the Ray
session, and the distributed suite's LayoutPool (tests/distributed/conftest.py: all world-4 / world-8 layouts in one
torchrun launch each, which two workers would each launch again). Module-scoped fixtures (a demo sweep shared by a
file's tests) are kept by grouping every other test by its file. Unit tests stay ungrouped: they balance the load.
Why two workers on a 2-core box: the suite waits on daemons, process start-up and timeouts for much of its time
(1,412 s CPU in 1,403 s wall when run serially).
"""

from __future__ import annotations

import pytest

# session fixtures that stand for one shared resource -> its group (a test whose fixture closure holds one)
SHARED = {"slurm_cluster": "slurm", "slurm_launcher_factory": "slurm", "ray_session": "ray", "pool_rows": "layout_pool"}


def group_of(path: str, nodeid: str, fixturenames: tuple[str, ...] = ()) -> str | None:
    """The xdist group of a test at `path` (relative, posix) with `nodeid` and fixture closure `fixturenames`;
    None = schedule freely. The contract suite reaches SLURM/Ray through request.getfixturevalue (not in the
    closure), hence the name checks."""
    for fixture in fixturenames:
        if fixture in SHARED:
            return SHARED[fixture]
    name = path.rsplit("/", 1)[-1]
    if "slurm" in name or "[slurm" in nodeid:
        return "slurm"
    if "ray" in name or "[ray" in nodeid:
        return "ray"
    if path.startswith("tests/unit/"):
        return None
    return path


def assign_groups(items: list[pytest.Item]) -> None:
    """Mark each item with its xdist group (tests/conftest.py calls this before xdist reads the marks)."""
    for item in items:
        group = group_of(item.nodeid.split("::", 1)[0], item.nodeid, tuple(item.fixturenames))
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def check_grouping(session: pytest.Session) -> None:
    """Under `--dist loadgroup` xdist must have turned every group mark into a node-id suffix; if a pytest/xdist
    upgrade breaks that (pytest 9 with xdist 3.8 does), two workers would start the same SLURM/Ray clusters and fight
    over them: fail loudly instead."""
    if not getattr(session.config.option, "loadgroup", False):  # set in xdist workers only
        return
    lost = [i.nodeid for i in session.items if any(i.iter_markers("xdist_group")) and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} test(s) (e.g. {lost[0]}): pytest {pytest.__version__} and this "
            "pytest-xdist disagree on node ids; install pytest<9 (pyproject.toml [test])"
        )
