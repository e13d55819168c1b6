"""How the launcher turns a failed trial's error files into one row (docs/trial_protocol.md "What the launcher does
with it"): the rank that failed is the cause; a rank that only saw its peer vanish is not."""

from __future__ import annotations

import json

from autotune.core.types import ParallelPlan
from autotune.results.trialfile import make_spec
from autotune.spec.config import load_config
from launchers.protocol import assemble_row, is_peer_lost

GLOO_PEER_GONE = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:41234"


def _row(tmp_path, errors: list[dict], returncode: int = 1, timed_out: bool = False) -> dict:
    cfg = load_config(["model=tiny", "cluster=cpu"])
    spec = make_spec(cfg, ParallelPlan(dp=2, grad_accum_steps=2), sweep_id="s", trial_id="t")
    result = tmp_path / "RESULT.json"
    for err in errors:  # written in this order: the first is the oldest
        (tmp_path / f"RESULT.json.rank{err['rank']}.err.json").write_text(json.dumps(err))
    return assemble_row(
        spec,
        result,
        timed_out=timed_out,
        cancelled=False,
        returncode=returncode,
        started_at="a",
        ended_at="b",
        wall_s=1.0,
        log_path="x.log",
        backend="local",
    )


def _err(rank: int, error_type: str, message: str, status: str = "crash") -> dict:
    return {
        "rank": rank,
        "status": status,
        "error_type": error_type,
        "error_message": message,
        "peer_lost": status == "crash" and is_peer_lost(RuntimeError(message)),
    }


def test_peer_lost_is_recognised_through_the_exception_chain():
    try:
        try:
            raise RuntimeError(GLOO_PEER_GONE)
        except RuntimeError as inner:
            raise RuntimeError("stage 0 backward failed") from inner
    except RuntimeError as outer:
        assert is_peer_lost(outer)
    assert not is_peer_lost(RuntimeError("injected fault 'crash_rank1' on rank 1"))


def test_silent_death_of_a_rank_is_killed_not_the_survivors_error(tmp_path):
    row = _row(tmp_path, [_err(0, "RuntimeError", GLOO_PEER_GONE)])
    assert (row["status"], row["error_type"]) == ("crash", "Killed")
    assert row["error_message"].startswith("rank(s) [1] died without writing an error"), row["error_message"]


def test_the_failing_rank_wins_over_an_older_peer_lost_error(tmp_path):
    row = _row(tmp_path, [_err(0, "RuntimeError", GLOO_PEER_GONE), _err(1, "ValueError", "bad shape")])
    assert (row["status"], row["error_type"], row["error_message"]) == ("crash", "ValueError", "rank 1: bad shape")


def test_oom_on_any_rank_wins(tmp_path):
    row = _row(tmp_path, [_err(1, "RuntimeError", "boom"), _err(0, "MemoryError", "no memory", status="oom")], 3)
    assert (row["status"], row["error_type"]) == ("oom", "MemoryError")


def test_a_peer_noticing_the_timeout_kill_leaves_the_trial_a_timeout(tmp_path):
    row = _row(tmp_path, [_err(1, "RuntimeError", GLOO_PEER_GONE)], returncode=-9, timed_out=True)
    assert (row["status"], row["error_type"]) == ("timeout", "Timeout")
