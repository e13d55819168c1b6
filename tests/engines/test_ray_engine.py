"""Ray engine tests, run inside a private network namespace (`unshare --net` with loopback up): there Ray binds and
probes only 127.0.0.1. A process outside cannot reach that Ray, so the checks (ray_checks.py) and the launcher contract
suite's `ray` case run in a child pytest inside the namespace; this test fails with its output if they fail."""

from __future__ import annotations

import os
import re

import pytest
from engine_fixtures import REPO, run_in_netns, run_pytest_in_netns


def test_private_namespace_has_only_loopback():
    out = run_in_netns(["sh", "-c", "ip -o link show && ip -4 -o addr show"], timeout_s=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines[:-1]] == ["lo"], out.stdout  # one link: loopback
    assert "state UNKNOWN" in lines[0] or "UP" in lines[0], out.stdout
    assert lines[-1].split()[1:4] == ["lo", "inet", "127.0.0.1/8"], out.stdout  # its only address


@pytest.mark.timeout(2400)  # one test holding ten (each under the default 900 s in the child)
def test_ray_checks_and_contract_suite_in_private_netns():
    paths = [
        str(REPO / "tests" / "engines" / "ray_checks.py"),
        str(REPO / "tests" / "contract" / "test_launcher_contract.py"),
    ]
    out = run_pytest_in_netns(paths, timeout_s=1800, extra=["-k", "ray_checks or ray", "-s", "-rA"])
    tail = out.stdout[-8000:] + out.stderr[-3000:]
    assert out.returncode == 0, tail
    passed = re.search(r"(\d+) passed", out.stdout)
    # 5 Ray checks + the 5 contract tests of the `ray` case, all run (none skipped, none deselected by accident)
    assert passed and int(passed.group(1)) >= 10, tail
    assert " skipped" not in out.stdout.splitlines()[-1], tail
    print(tail[-1500:], file=os.sys.stderr)
