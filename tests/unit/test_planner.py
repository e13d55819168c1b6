"""Enumeration: exact columns, canonical layouts, ids equal to the reference implementation, ranking, and the
one-line errors when nothing can run."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.trial import MemoryEstimate, PerfEstimate
from autotune.core.types import PLAN_FIELDS, candidate_id
from autotune.layouts.candidate import plan_from_row
from autotune.layouts.planner import COLUMNS, NoValidLayoutError, best_candidates, enumerate_candidates
from autotune.predict.memory import estimate_memory
from autotune.predict.perf import estimate_perf
from autotune.spec.config import load_config


def _estimate_columns(cls) -> list[str]:
    """The column names of a scalar estimate (MemoryEstimate / PerfEstimate.as_columns): the frame must use the same."""
    return list(cls(*[0.0] * len(dataclasses.fields(cls))).as_columns())


@pytest.fixture(scope="module")
def cfg8b():
    return load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])


@pytest.fixture(scope="module")
def df8b(cfg8b):
    return enumerate_candidates(cfg8b, 64)


def test_columns_exact(df8b):
    # identity and every ParallelPlan field in declaration order (the completeness test checks each is wired), the
    # verdict, the scalar estimates' own column names (estimate --json uses the same), the margin, the rank
    layout = ["candidate_id", "num_gpus", *PLAN_FIELDS]
    margin = ["mem_margin_bytes", "mem_margin_sigma"]
    expected = layout + ["reject_rule", "reject_reason", "fits"] + _estimate_columns(MemoryEstimate) + margin
    assert list(df8b.columns) == COLUMNS == expected + _estimate_columns(PerfEstimate) + ["rank"]


def test_small_space_counted_by_hand():
    # 4 GPUs, tp in {1,2}, pp=cp=1 -> layouts (dp4,tp1), (dp2,tp2); x zero {0,1} x SP {true,false} where tp>1 only:
    # tp1: 2 rows, tp2: 2 x 2 = 4 rows -> 6
    cfg = load_config(
        [
            "space.tp=[1,2]",
            "space.pp=[1]",
            "space.cp=[1]",
            "space.zero_stage=[0,1]",
            "space.micro_batch_size=[1]",
            "space.recompute=[none]",
            "space.vpp=[1,2]",
            "space.compile=[false]",
        ]
    )
    df = enumerate_candidates(cfg, 4)
    assert len(df) == 6
    assert sorted(zip(df.dp, df.tp, df.sequence_parallel.astype(bool))) == sorted(
        [(4, 1, False)] * 2 + [(2, 2, True)] * 2 + [(2, 2, False)] * 2
    )
    assert (df.grad_accum_steps == cfg.train.global_batch_size // df.dp).all()


def test_canonical_layouts(df8b):
    assert not ((df8b.tp == 1) & df8b.sequence_parallel).any()
    assert not ((df8b.pp == 1) & (df8b.vpp > 1)).any()
    assert ((df8b.vpp > 1) == (df8b.pp_schedule == "interleaved_1f1b")).all()
    assert (df8b.dp * df8b.tp * df8b.pp * df8b.cp == 64).all()
    assert df8b.candidate_id.is_unique


def test_candidate_ids_match_reference(df8b, cfg8b):
    for _, row in df8b.iloc[::7].iterrows():
        assert row.candidate_id == candidate_id(plan_from_row(row), cfg8b.model, cfg8b.train)


def test_rows_match_scalar_estimators(df8b, cfg8b):
    for _, row in df8b.iloc[::613].iterrows():
        plan = plan_from_row(row)
        mem = estimate_memory(plan, cfg8b.model, cfg8b.train, cfg8b.cluster).as_columns()
        perf = estimate_perf(plan, cfg8b.model, cfg8b.train, cfg8b.cluster).as_columns()
        for k, v in {**mem, **perf}.items():
            assert row[k] == pytest.approx(v), k


def test_memory_rejects_keep_predictions_and_reason(df8b):
    over = df8b[df8b.reject_reason.str.startswith("needs ", na=False)]
    assert len(over) > 0 and not over.fits.any() and over["rank"].isna().all()
    assert over.pred_tokens_per_s.notna().all() and (over.pred_tokens_per_s > 0).all()
    r = over.iloc[0]
    assert r.reject_reason == (
        f"needs {r.mem_reserved_bytes / 2**30:.1f} GiB > 75.7 GiB usable (79.6 GiB - 5% headroom)"
    )  # 85,520,809,984 B = 79.6 GiB; x 0.95 = 75.7


def test_rank_orders_valid_fitting_by_expected_throughput(df8b):
    # tok/s x Phi(mem_margin_sigma) (autotune/predict/margin.py; space.min_margin_sigma defaults to 0, so no group split)
    from autotune.predict.margin import fit_probability

    ranked = df8b[df8b["rank"].notna()].sort_values("rank")
    assert ranked.reject_reason.isna().all() and ranked.fits.all()
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    expected = ranked.pred_tokens_per_s * fit_probability(ranked.mem_margin_sigma.to_numpy())
    assert expected.is_monotonic_decreasing
    assert df8b[df8b.reject_reason.notna()]["rank"].isna().all()


def test_best_candidates_top_k(cfg8b):
    top = best_candidates(cfg8b, 64, 3)
    assert list(top["rank"]) == [1, 2, 3]


def test_no_layout_for_the_batch():
    cfg = load_config(["model=llama-3.1-8b", "train.global_batch_size=6", "space.pp=[1]", "space.cp=[1]"])
    with pytest.raises(
        NoValidLayoutError,
        match=r"^train.global_batch_size=6 is not divisible by "
        r"dp\*micro_batch_size for any layout of 64 GPUs \(dp\*micro_batch_size is one of \[8, 16, 32, 64, 128, 256\]\): "
        r"train.global_batch_size=8 would divide$",
    ):
        best_candidates(cfg, 64)


def test_no_layout_fits():
    cfg = load_config(["model=llama-3.1-405b", "cluster=h100-sxm-80gb"])
    with pytest.raises(NoValidLayoutError, match=r"^no layout of 8 GPUs fits: smallest needs [0-9.]+ GiB > 75.7 GiB"):
        best_candidates(cfg, 8)


def test_no_factorisation():
    cfg = load_config(["space.tp=[1]", "space.pp=[1]", "space.cp=[1]", "space.dp=[2]"])
    with pytest.raises(NoValidLayoutError, match=r"^no dp\*tp\*pp\*cp = 3 from space.tp=\[1\]"):
        best_candidates(cfg, 3)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_num_gpus(cfg8b, bad):
    with pytest.raises(ValueError, match="num_gpus="):
        enumerate_candidates(cfg8b, bad)


def test_few_microbatches_run_gpipe_and_tied_models_pipeline():
    # Llama-3.2-1B (tied embeddings), 16 GPUs, global batch 16: pp=4 x dp=4 leaves 4 sequences per replica, so
    # micro_batch_size 4 gives 1 micro-batch < pp -> GPipe (torch's 1F1B needs n_microbatches >= stages); mbs 1 gives
    # 4 -> 1F1B. Both are valid (the planner prices the bubble, (pp-1)/m = 3 vs 3/4 of compute, instead of a rule).
    cfg = load_config(
        [
            "model=llama-3.2-1b",
            "cluster=h100-sxm-80gb",
            "train.global_batch_size=16",
            "space.tp=[1]",
            "space.pp=[4]",
            "space.cp=[1]",
            "space.vpp=[1]",
            "space.zero_stage=[1]",
            "space.micro_batch_size=[1,4]",
            "space.recompute=[full]",
            "space.compile=[false]",
        ]
    )
    df = enumerate_candidates(cfg, 16).set_index("micro_batch_size")
    assert (df.loc[4, "grad_accum_steps"], df.loc[4, "pp_schedule"]) == (1, "gpipe")
    assert (df.loc[1, "grad_accum_steps"], df.loc[1, "pp_schedule"]) == (4, "1f1b")
    assert df.reject_reason.isna().all() and df["rank"].notna().all()
    for mbs in (1, 4):
        p = estimate_perf(
            plan_from_row(df.loc[mbs].to_dict() | {"micro_batch_size": mbs}), cfg.model, cfg.train, cfg.cluster
        )
        assert df.loc[mbs, "pred_step_s"] == pytest.approx(p.step_s)
        assert p.bubble_s == pytest.approx(3 / df.loc[mbs, "grad_accum_steps"] * p.compute_s)


def test_config_derives_the_same_schedule():
    # plan.pp_schedule=null takes autotune.core.plan_arrays.pp_schedule_codes, like the enumeration: tiny, batch 4, pp=4
    base = ["model=tiny", "train.global_batch_size=4", "plan.pp=4"]
    assert load_config([*base, "plan.micro_batch_size=2"]).plan(4).pp_schedule == "gpipe"  # 2 micro-batches < 4
    assert load_config([*base, "plan.micro_batch_size=1"]).plan(4).pp_schedule == "1f1b"  # 4 micro-batches
    assert load_config([*base, "plan.vpp=2"]).plan(4).pp_schedule == "interleaved_1f1b"
    assert load_config([*base, "plan.micro_batch_size=2", "plan.pp_schedule=1f1b"]).plan(4).pp_schedule == "1f1b"


def test_compile_enumerates_both_values_and_keeps_the_compile_false_ids():
    # space.compile=[false,true] doubles the 2 layouts of 4 GPUs (tp in {1,2}, SP off); a compile=false row keeps the
    # id it had before the field existed (a field added later enters the id only where it differs from its default)
    base = ["space.tp=[1,2]", "space.pp=[1]", "space.cp=[1]", "space.zero_stage=[1]", "space.micro_batch_size=[1]"]
    base += ["space.recompute=[none]", "space.vpp=[1]", "space.sequence_parallel=[false]"]
    df = enumerate_candidates(load_config([*base, "space.compile=[false,true]"]), 4)
    assert len(df) == 4 and sorted(df["compile"].astype(bool).tolist()) == [False, False, True, True]
    off = enumerate_candidates(load_config([*base, "space.compile=[false]"]), 4)
    assert set(off.candidate_id) == set(df[~df["compile"].astype(bool)].candidate_id)
    assert not set(off.candidate_id) & set(df[df["compile"].astype(bool)].candidate_id)
