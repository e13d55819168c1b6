"""tests/skip_policy.py: an unexpected skip fails the session with its node id and reason, an expected one (listed with
its reason) does not, an xfail is no skip; every listed skip names a test that exists and skips for that reason; and
no test or benchmark reads data from an absolute path outside the repository (such a test skips, or fails, on a
clean machine)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from skip_policy import EXPECTED_SKIPS, is_expected

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = "tests/unit/test_reference_runs.py::test_model_accuracy_before_figures_still_compute"

FAKE_SUITE = """
import pytest

def test_model_accuracy_before_figures_still_compute():
    pytest.skip("commit abc is not in this clone's history (shallow clone)")

def test_reads_a_missing_file():
    pytest.skip("/elsewhere/rows.csv not present")

@pytest.mark.xfail(reason="known", strict=True)
def test_known_bug():
    assert False

def test_fine():
    pass
"""


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """A child pytest with the skip policy as its only plugin, on the fake suite written under tmp_path."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    cmd = [sys.executable, "-m", "pytest", "-p", "skip_policy", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_unexpected_skip_fails_the_session_and_expected_one_does_not(tmp_path):
    suite = tmp_path / "tests" / "unit"
    suite.mkdir(parents=True)
    (suite / "test_reference_runs.py").write_text(FAKE_SUITE)
    (suite / "test_gone.py").write_text('import pytest\npytest.skip("module data missing", allow_module_level=True)\n')

    out = _pytest(tmp_path, "tests")
    assert out.returncode == 1, out.stdout
    bad = sorted(line for line in out.stdout.splitlines() if line.startswith("UNEXPECTED SKIP"))
    assert bad == [
        "UNEXPECTED SKIP tests/unit/test_gone.py: module data missing",
        "UNEXPECTED SKIP tests/unit/test_reference_runs.py::test_reads_a_missing_file: /elsewhere/rows.csv not present",
    ], out.stdout
    assert "2 unexpected skip(s)" in out.stdout and "1 passed, 3 skipped, 1 xfailed" in out.stdout

    out = _pytest(tmp_path, "tests/unit/test_reference_runs.py", "-k", "not missing_file")
    assert out.returncode == 0 and "UNEXPECTED" not in out.stdout, out.stdout
    assert "1 passed, 1 skipped, 1 deselected, 1 xfailed" in out.stdout


def test_expected_means_listed_test_and_listed_reason():
    assert is_expected(EXPECTED, "commit 1234 is not in this clone's history (shallow clone)")
    assert not is_expected(EXPECTED, "benchmarks/model_accuracy.py not found")  # same test, another reason
    assert not is_expected(EXPECTED.replace("before", "after"), "(shallow clone)")
    assert is_expected("tests/unit/test_x.py::test_y[h100]", "no CUDA device", frozenset({"gpu"}))
    assert not is_expected("tests/unit/test_x.py::test_y", "no CUDA device")


def test_every_expected_skip_names_a_test_that_skips_for_that_reason():
    for e in EXPECTED_SKIPS:
        assert len(e.why) > 20, e
        if not e.nodeid:
            assert e.marker and e.marker in (ROOT / "pyproject.toml").read_text(), e  # a registered marker
            continue
        path, name = e.nodeid.split("::")
        source = (ROOT / path).read_text()
        (fn,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
        body = ast.get_source_segment(source, fn)
        assert "pytest.skip(" in body and e.reason in body, e


SYSTEM_DIRS = ("proc", "sys", "dev", "tmp", "usr", "etc", "bin")


def test_no_test_or_benchmark_reads_an_absolute_path_outside_the_repository():
    """Every string literal that is an absolute path under tests/ and benchmarks/ lies in a system folder; data files
    are found relative to the repository (f-string fragments and globs are not paths)."""
    pattern = re.compile(r"^/([A-Za-z_][\w.-]*)/")
    found = []
    for folder in ("tests", "benchmarks"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(f.read_text())
            fragments = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
            for n in ast.walk(tree):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in fragments:
                    m = pattern.match(n.value)
                    if m and m.group(1) not in SYSTEM_DIRS:
                        found.append(f"{f.relative_to(ROOT)}:{n.lineno}: {n.value}")
    assert found == []
