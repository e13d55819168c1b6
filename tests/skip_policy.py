"""A skipped test is a defect unless it is listed here. tests/conftest.py installs the hooks below: every skip of the
session (a test's setup, call or teardown, or a whole module at collection) is recorded, and a skip that no entry of
EXPECTED_SKIPS accepts fails the run (exit 1) with one line per skip naming the test and its reason.

Why: a test that skips on a clean machine never runs in CI, and nobody notices (tests/unit/test_offload.py once read
its reference rows from a path outside the repository and skipped without them). Data a test reads lives in the
repository; a missing optional tool is a broken install, which must fail. What may skip is what depends on the machine
or the checkout and cannot be made present by `make`: listed below with the reason text that must match, so the same
test skipping for another reason still fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class ExpectedSkip:
    nodeid: str  # the test's node id without parameters ("path::name"), or "" for every test with `marker`
    reason: str  # a substring the skip reason must contain
    why: str
    marker: str = ""


EXPECTED_SKIPS: tuple[ExpectedSkip, ...] = (
    ExpectedSkip(
        "tests/unit/test_reference_runs.py::test_model_accuracy_before_figures_still_compute",
        "shallow clone",
        "replays the model of benchmarks/model_accuracy.py's BEFORE_COMMIT from git history, which a shallow clone "
        "lacks; CI's clone is full, so CI runs it",
    ),
    ExpectedSkip(
        "",
        "",
        "GPU tests are opt-in (-m gpu; deselected by default, never counted as skips); one selected on a machine "
        "without the GPU it needs may skip",
        marker="gpu",
    ),
)

_RECORDED: list[tuple[str, str, frozenset[str]]] = []  # (node id, reason, marker names) of every skip this session


def skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def is_expected(nodeid: str, reason: str, markers: frozenset[str] = frozenset()) -> bool:
    base = nodeid.split("[", 1)[0]
    for e in EXPECTED_SKIPS:
        if e.reason not in reason:
            continue
        if (e.marker and e.marker in markers) or (e.nodeid and e.nodeid == base):
            return True
    return False


def unexpected_skips(recorded: list[tuple[str, str, frozenset[str]]]) -> list[str]:
    """One line per recorded skip that EXPECTED_SKIPS does not accept."""
    return [f"{nodeid}: {reason}" for nodeid, reason, markers in recorded if not is_expected(nodeid, reason, markers)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is reported as skipped too; it is not one
        _RECORDED.append((report.nodeid, skip_reason(report), frozenset(report.keywords)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:  # a module-level pytest.skip / importorskip: every test in it silently gone
        _RECORDED.append((report.nodeid, skip_reason(report), frozenset()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if unexpected_skips(_RECORDED) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:  # after sessionfinish, before totals
    bad = unexpected_skips(_RECORDED)
    if bad:
        msg = f"{len(bad)} unexpected skip(s): a skip must be listed in tests/skip_policy.py EXPECTED_SKIPS"
        terminalreporter.write_sep("=", msg, red=True)
        for line in bad:
            terminalreporter.write_line(f"UNEXPECTED SKIP {line}")
