"""Layout fields derived from ParallelPlan: one candidate-id implementation (ids unchanged since before the
refactor, so stored results and resume keep matching), rejection rule ids carried as data, pruned rows with rules."""

import dataclasses
import hashlib
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autotune.core import model as model_module
from autotune.core import types as types_module
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import PLAN_FIELDS, ParallelPlan, candidate_id, py_value
from autotune.layouts.candidate import plan_from_row
from autotune.layouts.planner import candidate_ids, enumerate_arrays, enumerate_candidates
from autotune.layouts.rules import MEMORY_RULE, rejections
from autotune.results.schema import RESULT_SCHEMA, empty_row
from autotune.results.store import read_results, write_row
from autotune.search.oom_pruning import OOM_RULE, prune_after_oom
from autotune.spec.config import load_config


@pytest.fixture(scope="module")
def tiny():
    return load_config(["model=tiny"])


# the plan and model fields of the first release (ParallelPlan and ModelSpec at commit 46ae7e1), which every id hashes
FIRST_FIELDS = types_module._ID_FIELDS_ALWAYS
FIRST_MODEL_FIELDS = model_module._ID_FIELDS_ALWAYS


def reference_id(plan, model, train) -> str:
    """The candidate id exactly as autotune computed it before the layout refactor (commit 46ae7e1,
    autotune/core/types.py candidate_id): sha1 of json.dumps({"plan", "model", "train"}, sort_keys=True)[:12]; a field
    added since enters only when it is not at its default (docs/extending.md), so old ids stay valid."""
    defaults = ParallelPlan().to_dict()
    plan_dict = {k: v for k, v in dataclasses.asdict(plan).items() if k in FIRST_FIELDS or v != defaults[k]}
    model_defaults = {f.name: f.default for f in dataclasses.fields(model)}
    # head_dim defaults to null and resolves to hidden/heads, the value every model had before the field existed
    model_defaults["head_dim"] = model.hidden_size // model.num_heads
    model_dict = {
        k: v for k, v in dataclasses.asdict(model).items() if k in FIRST_MODEL_FIELDS or v != model_defaults[k]
    }
    payload = {
        "plan": plan_dict,
        "model": model_dict,
        "train": {"seq_len": train.seq_len, "global_batch_size": train.global_batch_size, "precision": train.precision},
    }
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def test_planner_and_scalar_ids_agree_with_the_old_ids_on_every_candidate(tiny):
    arr = enumerate_arrays(tiny.space, tiny.train, 8)
    ids = candidate_ids(arr, tiny.model, tiny.train)
    df = enumerate_candidates(tiny, 8)
    assert len(ids) == len(df) > 200 and ids == df["candidate_id"].tolist()
    for row in df.itertuples():
        plan = plan_from_row(row._asdict())
        assert (
            row.candidate_id == candidate_id(plan, tiny.model, tiny.train) == reference_id(plan, tiny.model, tiny.train)
        )


def test_ids_pinned_to_values_computed_before_the_refactor(tiny):
    # printed by autotune/core/types.py at commit 46ae7e1 for model=tiny, train seq_len=128, global_batch_size=16
    p = ParallelPlan(
        dp=2,
        tp=2,
        pp=2,
        vpp=2,
        pp_schedule="interleaved_1f1b",
        sequence_parallel=True,
        recompute="selective",
        zero_stage=1,
        micro_batch_size=2,
        grad_accum_steps=4,
    )
    assert candidate_id(p, tiny.model, tiny.train) == "319de4375d47"
    assert candidate_id(ParallelPlan(), tiny.model, tiny.train) == "f8fa431bf40e"
    assert candidate_ids(arrays_from_plans([p, ParallelPlan()]), tiny.model, tiny.train) == [
        "319de4375d47",
        "f8fa431bf40e",
    ]


def test_plan_from_row_round_trips_every_field(tiny):
    p = ParallelPlan(
        dp=2,
        tp=2,
        pp=2,
        vpp=2,
        pp_schedule="interleaved_1f1b",
        sequence_parallel=True,
        recompute="full",
        zero_stage=3,
        micro_batch_size=2,
        grad_accum_steps=4,
    )
    row = pd.DataFrame([p.to_dict()]).iloc[0]  # numpy scalars, as the planner's frame holds them
    assert plan_from_row(row) == p and plan_from_row(p.to_dict()) == p
    assert set(PLAN_FIELDS) == set(p.to_dict())


def test_py_value_unwraps_numpy_and_keeps_the_rest():
    import numpy as np

    assert type(py_value(np.int64(3))) is int and py_value(np.bool_(True)) is True and py_value("x") == "x"


def test_every_rejection_has_a_rule_id_and_memory_rejections_say_memory(tiny):
    df = enumerate_candidates(tiny, 8)
    assert (df["reject_rule"].notna() == df["reject_reason"].notna()).all()
    mem = df[df["reject_rule"] == MEMORY_RULE]
    assert mem["reject_reason"].str.startswith("needs ").all() and not mem["fits"].any()
    kv = df[df["reject_rule"] == "tp_divides_kv_heads"]  # tiny: 8 heads, 4 KV heads, space.tp up to 8
    assert len(kv) and (tiny.model.num_kv_heads % kv["tp"] != 0).all() and (kv["tp"] == 8).all()
    assert set(df["reject_rule"].dropna()) <= {
        MEMORY_RULE,
        "batch_divisible",
        "batch_product",
        "tp_divides_heads",
        "tp_divides_kv_heads",
        "tp_within_node",
        "pp_within_layers",
        "vpp_within_layers",
        "pp_divides_layers",
        "cp_divides_seq",
        "pp_microbatches",
        "interleaved_microbatches",
        "zero_needs_dp",
    }


def test_rule_ids_follow_the_first_failed_rule(tiny):
    # tp=16 > tiny's 8 heads and pp=2 with too few micro-batches: the heads rule comes first
    p = ParallelPlan(tp=16, pp=2, grad_accum_steps=1, micro_batch_size=16)
    rules, reasons = rejections(arrays_from_plans([p]), tiny.model, tiny.train, tiny.cluster, tiny.space)
    assert rules[0] == "tp_divides_heads" and reasons[0] == "tp=16 does not divide num_heads=8"
    q = ParallelPlan(dp=1, pp=2, micro_batch_size=16, grad_accum_steps=1)
    rules, reasons = rejections(arrays_from_plans([q]), tiny.model, tiny.train, tiny.cluster, tiny.space)
    assert rules[0] == "pp_microbatches" and "grad_accum_steps=1 < pp=2" in reasons[0]


def test_oom_pruning_marks_its_rule(tiny):
    df = enumerate_candidates(tiny, 8)
    ok = df[df["rank"].notna()]
    oom = ok.sort_values("micro_batch_size").iloc[0]
    after = prune_after_oom(ok, oom, "t0001")
    pruned = after[after["status"] == "pruned"]
    assert len(pruned) and (pruned["reject_rule"] == OOM_RULE).all()
    assert after.loc[after["status"] != "pruned", "reject_rule"].isna().all()


def test_pruned_rows_carry_the_rule(tiny, tmp_path):
    from autotune.layouts.candidate import Candidate
    from autotune.run.rows import pruned_row

    df = enumerate_candidates(tiny, 8)
    rejected = Candidate.from_row(df[df["reject_rule"] == "tp_divides_kv_heads"].iloc[0])
    assert rejected.rank is None and rejected.pred_mem_bytes is not None  # a rejected row keeps its predictions
    row = pruned_row(tiny, rejected, rejected.reject_reason, sweep_id="s", backend="local")
    assert row["reject_rule"] == "tp_divides_kv_heads" and row["status"] == "pruned"
    assert row["tp"] == rejected.plan.tp and row["num_gpus"] == 8 and row["pred_mem_bytes"] == rejected.pred_mem_bytes
    ok = Candidate.from_row(df[df["rank"].notna()].iloc[0])
    row2 = pruned_row(tiny, ok, "dominated by OOM trial t1 (mbs 2 >= 1)", sweep_id="s", backend="local", rule=OOM_RULE)
    assert row2["reject_rule"] == OOM_RULE and row2["candidate_id"] == ok.candidate_id
    write_row(tmp_path / "trials", row)
    got = read_results(tmp_path)
    assert got["reject_rule"].tolist() == ["tp_divides_kv_heads"]


def test_result_files_written_before_reject_rule_still_read(tmp_path):
    """A sweep stored before the column existed resumes: its rows read, with reject_rule null."""
    old_schema = pa.schema([f for f in RESULT_SCHEMA if f.name != "reject_rule"])
    row = empty_row()
    row.pop("reject_rule")
    row.update(sweep_id="s", trial_id="t0001", candidate_id="c", status="ok", tokens_per_s=1.0)
    (tmp_path / "trials").mkdir()
    pq.write_table(pa.Table.from_pylist([row], schema=old_schema), tmp_path / "trials" / "t0001.parquet")
    got = read_results(tmp_path)
    assert got["trial_id"].tolist() == ["t0001"] and got["reject_rule"].isna().all()
    assert got.attrs["corrupt_files"] == []
