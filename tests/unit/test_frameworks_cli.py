"""train.framework through the CLI: `plan` rejections name the framework, `sweep --backend simulate` predicts
under the profile, `report` shows each layout's peak under the target next to bench_model's, `export` warns when the
format's trainer is not the sweep's framework and writes the target's expected memory into the file."""

from __future__ import annotations

import pytest
from rich.console import Console

from autotune.analyse.report import best_row, print_summary
from autotune.analyse.target import expected_memory
from autotune.cli.main import main
from autotune.layouts.candidate import plan_from_row
from autotune.results.store import SweepStore, read_results

LLAMA = ["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.seq_len=4096", "train.global_batch_size=64"]


@pytest.fixture(scope="module")
def megatron_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("fw")
    # tp > 1 by construction: the checks below are about what TP changes between profiles (Megatron's SP activations
    # and contiguous buffers under bench_model's; the DeepSpeed engine's no-TP refusal), not about which layout wins
    argv = [
        "sweep",
        "--gpus",
        "8",
        "--backend",
        "simulate",
        "--max-trials",
        "3",
        "--sweep-id",
        "meg",
        "space.tp=[2,4,8]",
    ]
    assert main([*argv, *LLAMA, "train.framework=megatron", f"sweep.results_dir={root}"]) == 0
    return root / "meg"


def test_simulate_sweep_predicts_under_the_profile(megatron_sweep):
    df = read_results(megatron_sweep)
    cfg = SweepStore(megatron_sweep).config()
    assert cfg.train.framework == "megatron"
    sim = df[df["status"] == "simulated"]
    assert len(sim) >= 1
    for _, r in sim.iterrows():
        e = expected_memory(cfg.model, cfg.train, cfg.cluster, plan_from_row(r.to_dict()), "megatron")
        assert float(r["pred_mem_bytes"]) == pytest.approx(e["reserved_bytes"], rel=1e-6)


def test_report_shows_target_next_to_bench_model(megatron_sweep):
    console = Console(record=True, width=250)
    print_summary(megatron_sweep, console)
    text = console.export_text()
    assert "target train.framework=megatron" in text
    row = best_row(read_results(megatron_sweep))
    cfg = SweepStore(megatron_sweep).config()
    plan = plan_from_row(row)
    meg = expected_memory(cfg.model, cfg.train, cfg.cluster, plan, "megatron")["reserved_bytes"]
    bench = expected_memory(cfg.model, cfg.train, cfg.cluster, plan, "bench_model")["reserved_bytes"]
    lines = [x for x in text.splitlines() if str(row["trial_id"]) in x and f"{bench / 2**30:.2f}" in x]
    assert len(lines) == 1 and f"{meg / 2**30:.2f}" in lines[0] and meg < bench


def test_export_warns_and_writes_expected_memory(megatron_sweep, tmp_path, capsys):
    # the 3 megatron-planned layouts all use tp > 1: the deepspeed profile accepts none (issue 28: refuse, not a
    # file DeepSpeed cannot run), in one line naming the rule
    assert main(["export", str(megatron_sweep), "--best", "--format", "deepspeed"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the deepspeed profile accepts none of the sweep's 3" in err
    assert "the DeepSpeed engine has no tensor parallelism (tp must be 1)" in err
    out2 = tmp_path / "meg.args"
    assert main(["export", str(megatron_sweep), "--best", "--format", "megatron", "-o", str(out2)]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err  # the sweep's own framework: no warning
    assert "is the best of the 3 of 3 layouts the megatron profile accepts (re-ranked under it)" in err
    assert "# Expected memory under the megatron profile" in out2.read_text()


def test_plan_rejection_names_the_framework(capsys):
    rc = main(["plan", "--gpus", "16", *LLAMA, "train.framework=nanotron", "space.cp=[2]", "space.tp=[1]"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "nanotron: cp=2: ParallelismArgs has no context parallelism" in err


def test_memory_rejection_names_the_framework(tmp_path):
    import pandas as pd

    out = tmp_path / "all.csv"
    assert main(["plan", "--gpus", "16", "-o", str(out), *LLAMA, "train.framework=megatron"]) == 0
    df = pd.read_csv(out)
    mem = df[df["reject_rule"] == "memory"]
    assert len(mem) and mem["reject_reason"].str.startswith("megatron: needs ").all()


def test_real_backends_plan_trials_with_bench_model():
    """Trials that really run, run bench_model: a local/slurm/ray sweep plans them with bench_model's accounting,
    a simulate sweep with the target's."""
    from autotune.run.controller import _trial_framework
    from autotune.spec.config import load_config

    local = load_config([*LLAMA, "train.framework=megatron", "sweep.backend=local"])
    sim = load_config([*LLAMA, "train.framework=megatron", "sweep.backend=simulate"])
    assert _trial_framework(local).train.framework == "bench_model"
    assert _trial_framework(local).train.seq_len == local.train.seq_len
    assert _trial_framework(sim) is sim


def test_export_says_when_the_target_profile_rejects_the_layout(tmp_path, capsys):
    """A bench_model sweep's FP8-rowwise winner exported to Megatron: Megatron's --fp8-recipe has no rowwise recipe
    (rule megatron_fp8_rowwise): `--best` finds no layout that profile accepts and says so in one line (issue 28);
    `--trial` exports the chosen one anyway, and the file and the warning name that rule instead of a GiB figure."""
    argv = ["sweep", "--gpus", "8", "--backend", "simulate", "--max-trials", "2", "--sweep-id", "z3"]
    space = ["space.zero_stage=[3]", "space.tp=[1]", "space.pp=[1]", "space.cp=[1]", "space.fp8=[rowwise]"]
    assert main([*argv, *LLAMA, *space, f"sweep.results_dir={tmp_path}"]) == 0
    out = tmp_path / "meg.args"
    capsys.readouterr()
    assert main(["export", str(tmp_path / "z3"), "--best", "--format", "megatron", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the megatron profile accepts none of the sweep's 2" in err and not out.exists()
    trial = best_row(read_results(tmp_path / "z3"))["trial_id"]
    assert main(["export", str(tmp_path / "z3"), "--trial", trial, "--format", "megatron", "-o", str(out)]) == 0
    warn = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert len(warn) == 1 and "the megatron profile rejects this layout (megatron: fp8=rowwise" in warn[0]
    assert "not modelled, the profile rejects this layout (megatron: fp8=rowwise" in out.read_text()
    out2 = tmp_path / "tt.toml"
    assert main(["export", str(tmp_path / "z3"), "--best", "--format", "torchtitan", "-o", str(out2)]) == 0
    assert "GiB of" in capsys.readouterr().err  # torchtitan runs FSDP: a figure, no rejection


def test_best_for_format_skips_the_layouts_the_target_profile_rejects(megatron_sweep):
    """issue 28: `export --best --format deepspeed` takes the best row the deepspeed profile accepts, not the sweep's
    best (tp=2, which the DeepSpeed engine cannot run), and names both. One tp=1 row is added to the sweep's rows,
    ranked last by throughput."""
    import pandas as pd

    from autotune.cli.export import best_for_format

    df = read_results(megatron_sweep)
    base = df[df["status"] == "simulated"].iloc[0].to_dict()
    extra = dict(base, trial_id="tp1row", candidate_id="tp1row", tp=1, pp=1, cp=1, vpp=1, dp=8, micro_batch_size=1)
    extra.update(
        grad_accum_steps=8, sequence_parallel=False, zero_stage=3, recompute="full", ep=1, etp=1, tp_overlap=False
    )
    extra.update(tokens_per_s_per_gpu=1.0, pred_tokens_per_s_per_gpu=1.0, pp_schedule="1f1b", dp_shard=0)
    rows = pd.concat([df, pd.DataFrame([extra])], ignore_index=True)
    overall = best_row(rows)
    assert overall["tp"] > 1 and overall["trial_id"] != "tp1row"
    row, note = best_for_format(rows, megatron_sweep, "deepspeed")
    assert row["trial_id"] == "tp1row"
    assert f"the sweep's best, trial {overall['trial_id']}" in note
    assert "is rejected: deepspeed: tp=2: the DeepSpeed engine has no tensor parallelism" in note
