"""OOM-dominance pruning: the partial order documented in autotune/search/oom_pruning.py, checked case by case by hand."""

import itertools

import pandas as pd

from autotune.search.oom_pruning import dominance_reason, newly_pruned, prune_after_oom


def _row(cid, dp=2, tp=2, mbs=2, recompute="selective", zero=1, sp=True, pp=1, cp=1, vpp=1, sched="1f1b"):
    return dict(
        candidate_id=cid,
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        sequence_parallel=sp,
        pp_schedule=sched,
        micro_batch_size=mbs,
        recompute=recompute,
        zero_stage=zero,
        reject_reason=None,
    )


def _grid():
    rows = []
    for i, (mbs, rc, z) in enumerate(itertools.product([1, 2, 4], ["none", "selective", "full"], [0, 1, 3])):
        rows.append(_row(f"c{i:02d}", mbs=mbs, recompute=rc, zero=z))
    rows.append(_row("other_tp", tp=4, dp=1, mbs=4, recompute="none", zero=0))  # different shape: never pruned
    rows.append(_row("no_sp", sp=False, mbs=4, recompute="none", zero=0))
    return pd.DataFrame(rows)


def test_reason_names_the_differing_dimensions():
    oom = _row("x", mbs=2, recompute="selective", zero=1)
    assert dominance_reason(oom, _row("y", mbs=4, recompute="none", zero=1)) == "mbs 4 >= 2, recompute none < selective"
    assert dominance_reason(oom, _row("y", mbs=2, recompute="selective", zero=0)) == "zero 0 < 1"
    assert dominance_reason(oom, _row("y")) == "same layout"
    assert dominance_reason(oom, _row("y", mbs=1)) is None  # smaller micro-batch may fit
    assert dominance_reason(oom, _row("y", recompute="full")) is None  # more recompute may fit
    assert dominance_reason(oom, _row("y", zero=3)) is None  # more sharding may fit
    assert dominance_reason(oom, _row("y", tp=4, dp=1)) is None  # another shape: no claim


def test_prune_marks_exactly_the_dominated_set():
    df = _grid()
    oom = _row("c_oom", mbs=2, recompute="selective", zero=1)
    out = prune_after_oom(df, oom, trial_id="t0007")
    pruned = out[out["status"] == "pruned"]
    # By hand: mbs in {2, 4} (2 values) x recompute in {none, selective} (2) x zero in {0, 1} (2) = 8 layouts.
    assert len(pruned) == 8
    assert set(pruned["micro_batch_size"]) == {2, 4} and set(pruned["zero_stage"]) == {0, 1}
    assert set(pruned["recompute"]) == {"none", "selective"}
    row = out[(out.micro_batch_size == 4) & (out.recompute == "none") & (out.zero_stage == 1)].iloc[0]
    assert row["reject_reason"] == "dominated by OOM trial t0007 (mbs 4 >= 2, recompute none < selective)"
    assert out.set_index("candidate_id").loc["other_tp", "status"] is None
    assert out.set_index("candidate_id").loc["no_sp", "status"] is None
    assert "status" not in df.columns  # input untouched (pure)


def test_done_and_rejected_candidates_keep_their_state():
    df = _grid()
    df.loc[df.candidate_id == "c22", "reject_reason"] = "tp=2 spans nodes"  # planner's reason wins
    ids = df.candidate_id.tolist()
    oom = _row(ids[0], mbs=1, recompute="full", zero=3)  # the weakest layout OOMs: everything of its shape dominated
    out = prune_after_oom(df, oom, "t0001", done_ids=["c05"])
    by_id = out.set_index("candidate_id")
    assert by_id.loc["c05", "status"] is None and by_id.loc["c22", "reject_reason"] == "tp=2 spans nodes"
    assert by_id.loc[ids[0], "status"] is None  # the OOM trial has its own row
    assert (out["status"] == "pruned").sum() == 27 - 3  # 27 same-shape layouts minus OOM, done, rejected
    again = prune_after_oom(out, _row("z", mbs=1, recompute="full", zero=3), "t0002", done_ids=["c05", ids[0]])
    assert len(newly_pruned(out, again)) == 0  # first reason kept, nothing pruned twice
    assert len(newly_pruned(df, out)) == 24
