"""Failure classification inside the trial (docs/trial_protocol.md), with real torchrun, real rlimits and real signals:
a layout forced past its memory budget is `oom` (exit 3), an exception on one rank is `crash` (exit 1), and in both
cases no rank is left behind."""

from __future__ import annotations

import json
import time

from conftest import make_spec, pids_with_token, torchrun


def _launch(spec, tmp_path, timeout_s: float = 300.0):
    spec_path, out = tmp_path / "SPEC.json", tmp_path / "RESULT.json"
    spec_path.write_text(spec.to_json())
    t0 = time.monotonic()
    code, token = torchrun(
        spec.plan.world_size,
        ["-m", "bench_model.run", "--spec", str(spec_path), "--out", str(out)],
        tmp_path / "log.txt",
        timeout_s,
    )
    errs = {
        int(p.name.rsplit("rank", 1)[1].split(".")[0]): json.loads(p.read_text())
        for p in tmp_path.glob("RESULT.json.rank*.err.json")
    }
    return code, out, errs, token, time.monotonic() - t0


def _assert_all_gone(token: str) -> None:
    deadline = time.monotonic() + 10
    while pids_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids_with_token(token) == []


def test_memory_limit_gives_oom_not_crash_or_hang(tmp_path):
    # 24 MiB of extra address space cannot hold the tiny model's fp32 params + grads + AdamW state (3.3M params
    # x 16 bytes = 53 MB): allocation fails with ENOMEM inside torch -> MemoryError -> status oom, exit code 3.
    spec = make_spec(2, "fp32", ("plan.zero_stage=0",), memory_limit_bytes=24 * 2**20)
    code, out, errs, token, wall_s = _launch(spec, tmp_path)
    assert code != 0 and not out.exists()
    assert errs, (tmp_path / "log.txt").read_text()[-3000:]
    assert any(e["status"] == "oom" and e["error_type"] == "MemoryError" for e in errs.values()), errs
    assert "can't allocate memory" in next(e for e in errs.values() if e["status"] == "oom")["error_message"]
    _assert_all_gone(token)


def test_crash_on_one_rank_tears_down_all(tmp_path):
    spec = make_spec(2, "fp32", ("plan.zero_stage=0",), inject_fault="crash_rank1")
    code, out, errs, token, wall_s = _launch(spec, tmp_path)
    assert code != 0 and not out.exists()
    assert errs[1] == {
        "rank": 1,
        "status": "crash",
        "error_type": "RuntimeError",
        "error_message": "injected fault 'crash_rank1' on rank 1",
        "peer_lost": False,
    }
    # rank 0, if it noticed before torchrun ended it, saw its peer vanish: marked as a consequence, not a cause
    assert all(e["peer_lost"] for r, e in errs.items() if r != 1), errs
    assert wall_s < 250  # rank 0 was blocked in a collective: torchrun ended it, no hang until the timeout
    _assert_all_gone(token)


def test_ok_run_writes_result_and_exits_zero(tmp_path):
    spec = make_spec(1, "fp32", warmup_steps=0, timed_steps=1)
    code, out, errs, token, _ = _launch(spec, tmp_path)
    row = json.loads(out.read_text())
    assert code == 0 and errs == {} and row["status"] == "ok" and len(row["losses"]) == 1
    from autotune.results.schema import RESULT_COLUMNS

    assert list(row) == RESULT_COLUMNS
