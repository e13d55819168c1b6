"""Real local sweeps (tiny model, 2 gloo ranks on 127.0.0.1, 1 timed step) through `autotune sweep` for the search
strategies, an injected genuine OOM (RLIMIT_AS -> MemoryError) that prunes its dominated candidates, and the GPU-hour
budget."""

import optuna
import pytest

from autotune.cli.main import main
from autotune.layouts.planner import enumerate_candidates
from autotune.results.store import read_results
from autotune.search.oom_pruning import dominated_mask
from autotune.spec.config import load_config

SPACE = [
    "experiment=demo",
    "space.tp=[1]",
    "space.pp=[1]",
    "space.cp=[1]",
    "space.zero_stage=[0,2,3]",
    "space.micro_batch_size=[1,2,4]",
    "space.recompute=[none,full]",
    "sweep.warmup_steps=0",
]


def _sweep(tmp_path, *flags):
    argv = [
        "sweep",
        "--gpus",
        "2",
        "--backend",
        "local",
        "--steps",
        "1",
        "--sweep-id",
        "s",
        *flags,
        *SPACE,
        f"sweep.results_dir={tmp_path}",
    ]
    assert main(argv) == 0
    return read_results(tmp_path / "s")


def test_injected_oom_prunes_dominated_candidates(tmp_path, capsys):
    # random with the default seed (train.seed=1234) runs z3 mbs2 full first; an 8 MiB address-space margin makes it
    # raise a real MemoryError (it needs ~30 MiB beyond start-up: a 32 MiB margin sometimes fits; a 1 MiB one leaves
    # glibc no room for a thread's TLS block, and it aborts the rank before Python can raise). Dominated (autotune/search/oom_pruning.py): same shape, mbs >= 2 (2, 4), recompute <= full
    # (none, full), zero <= 3 (0, 2, 3) = 2*2*3 = 12 layouts, minus the OOM one = 11.
    df = _sweep(tmp_path, "--strategy", "random", "--max-trials", "1", "--memory-limit-bytes", str(8 * 2**20))
    oom = df[df["status"] == "oom"]
    assert len(oom) == 1 and oom.iloc[0]["error_type"] == "MemoryError"
    o = oom.iloc[0]
    assert (o["zero_stage"], o["micro_batch_size"], o["recompute"]) == (3, 2, "full")
    pruned = df[df["reject_reason"].fillna("").str.startswith(f"dominated by OOM trial {o['trial_id']} (")]
    assert len(pruned) == 11 and (pruned["status"] == "pruned").all()
    frame = enumerate_candidates(load_config(SPACE), 2)
    expected = set(frame.loc[dominated_mask(frame, o), "candidate_id"]) - {o["candidate_id"]}
    assert set(pruned["candidate_id"]) == expected
    row = pruned[(pruned.micro_batch_size == 4) & (pruned.recompute == "none") & (pruned.zero_stage == 0)].iloc[0]
    assert row["reject_reason"].endswith("(mbs 4 >= 2, recompute none < full, zero 0 < 3)")
    assert "pruned c" in capsys.readouterr().out


def test_optuna_pareto_sweep_shares_its_study(tmp_path):
    df = _sweep(tmp_path, "--strategy", "optuna", "--objective", "pareto", "--max-trials", "2")
    ran = df[df["status"] == "ok"]
    assert len(ran) == 2
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's' / 'optuna.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert {t.user_attrs["candidate_id"] for t in done} == set(ran["candidate_id"])
    assert all(len(t.values) == 2 and t.values[1] > 0 for t in done)  # (tokens/s/GPU, peak memory bytes)
    # seeded by the model: the first trial is the planner's rank 1
    frame = enumerate_candidates(load_config(SPACE), 2)
    first = min(done, key=lambda t: t.number)
    assert first.user_attrs["candidate_id"] == frame.sort_values("rank").iloc[0]["candidate_id"]


def test_halving_sweep_promotes_the_measured_best(tmp_path, capsys):
    df = _sweep(
        tmp_path, "--strategy", "halving", "sweep.halving_steps=[1,2]", "sweep.halving_pool=3", "sweep.max_trials=20"
    )
    ok = df[df["status"] == "ok"]
    rung0, rung1 = ok[~ok["trial_id"].str.endswith("-r1")], ok[ok["trial_id"].str.endswith("-r1")]
    assert len(rung0) == 3 and (rung0["timed_steps"] == 1).all()
    assert len(rung1) == 1 and (rung1["timed_steps"] == 2).all()  # ceil(3/3) survivor, 2 timed steps
    best0 = rung0.sort_values("tokens_per_s_per_gpu").iloc[-1]["candidate_id"]
    assert rung1.iloc[0]["candidate_id"] == best0
    assert "calibrated: " in capsys.readouterr().out  # >= 3 measured rows refit the models during the sweep


def test_budget_stops_the_sweep(tmp_path, capsys):
    # 0.0001 GPU-h = 0.36 GPU-s: one 2-rank trial spends it (its gpu_seconds = the trainer's wall_s x 2, and the
    # trainer alone -- process group, model, one step -- takes > 0.18 s; 0.001 GPU-h was not always spent on a quiet box)
    df = _sweep(tmp_path, "--strategy", "random", "--max-trials", "3", "--budget-gpu-hours", "0.0001")
    out = capsys.readouterr().out
    assert (df["status"] == "ok").sum() == 1
    assert "GPU-hour budget spent" in out and "GPU-hours spent: " in out and "exhaustive grid (18 runnable" in out


@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("--budget-gpu-hours", "0", "--budget-gpu-hours='0' must be"),
        ("--objective", "speed", "invalid choice: 'speed'"),
    ],
)
def test_bad_search_flags(tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as e:
        main(["sweep", "--gpus", "2", flag, value, f"sweep.results_dir={tmp_path}"])
    assert e.value.code == 2 and message in capsys.readouterr().err
