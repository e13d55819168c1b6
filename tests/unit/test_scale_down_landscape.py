"""The scale-down benchmark's target and replica repeats (benchmarks/scale_down_accuracy.py, docs/scale_down.md
"Accuracy"): each layout's median over repeated world-8 landscapes (benchmarks/data/measure_landscape.py), the noise
of those repeats, and the runs of one replica. Numbers hand-computed from the toy frames below."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.data.measure_landscape import CPU_REPEATS, landscape_noise, median_landscape


def _frame(cpu: dict[str, float], status: dict[str, str] | None = None) -> pd.DataFrame:
    ids = sorted(cpu)
    return pd.DataFrame(
        {
            "candidate_id": ids,
            "status": [(status or {}).get(c, "ok") for c in ids],
            "step_cpu_time_mean_s": [cpu[c] for c in ids],
            "tokens_per_s_per_gpu": [100.0 / cpu[c] for c in ids],
            "step_time_mean_s": [4.0 * cpu[c] for c in ids],
            "dp": [2] * len(ids),
        }
    )


def test_the_target_is_each_layouts_median_over_the_runs():
    # a: 0.30 / 0.20 / 0.10 -> median 0.20 (an outlier run does not move it); b: 0.50 / 0.40 / 0.45 -> 0.45
    runs = [_frame({"a": 0.30, "b": 0.50}), _frame({"a": 0.20, "b": 0.40}), _frame({"a": 0.10, "b": 0.45})]
    med = median_landscape(runs).set_index("candidate_id")
    assert med.loc["a", "step_cpu_time_mean_s"] == pytest.approx(0.20)
    assert med.loc["b", "step_cpu_time_mean_s"] == pytest.approx(0.45)
    assert med.loc["b", "step_time_mean_s"] == pytest.approx(1.80)  # every measured column, not only the CPU one
    assert med.loc["a", "step_cpu_time_runs"] == [0.30, 0.20, 0.10] and med.loc["a", "dp"] == 2
    # one run is that run
    assert median_landscape(runs[:1])["step_cpu_time_mean_s"].tolist() == [0.30, 0.50]


def test_a_layout_not_ok_in_every_run_is_an_error_not_a_silent_drop():
    runs = [_frame({"a": 0.3, "b": 0.5}), _frame({"a": 0.2, "b": 0.4}, status={"b": "crash"})]
    with pytest.raises(ValueError, match=r"frame 1 has layouts \['b'\] not shared"):
        median_landscape(runs)
    with pytest.raises(ValueError, match="frames=\\[\\]"):
        median_landscape([])


def test_landscape_noise_pairwise_and_against_the_median():
    # one layout measured 0.10, 0.12, 0.15: pairs |0.12/0.10-1| = 0.2, |0.15/0.10-1| = 0.5, |0.15/0.12-1| = 0.25
    # -> median 0.25; against the median 0.12: 1/6, 0, 0.25 -> median 1/6
    runs = [_frame({"a": 0.10}), _frame({"a": 0.12}), _frame({"a": 0.15})]
    noise = landscape_noise(runs)
    assert noise["runs"] == 3
    assert noise["pairwise_median_abs_diff"] == pytest.approx(0.25)
    assert noise["run_vs_median_median_abs_diff"] == pytest.approx(1 / 6)


def test_the_committed_cpu_landscapes_share_their_40_layouts():
    frames = [pd.read_parquet(p) for p in CPU_REPEATS]
    med = median_landscape(frames)
    assert len(frames) == 3 and len(med) == 40 and med["step_cpu_time_mean_s"].gt(0).all()


def test_replica_repeats_keep_the_first_runs_key_and_suffix_the_others():
    import dataclasses
    from types import SimpleNamespace

    from benchmarks.scale_down_accuracy import _repeat_specs

    @dataclasses.dataclass(frozen=True)
    class Spec:
        trial_id: str

    runs = _repeat_specs("K", Spec("t7"), 3)
    assert [k for k, _ in runs] == ["K", "K#r2", "K#r3"]  # the first is the cache key of a single run
    assert [s.trial_id for _, s in runs] == ["t7", "t7-r2", "t7-r3"]  # each run its own run directory
    assert _repeat_specs("K", SimpleNamespace(trial_id="x"), 1) == [("K", SimpleNamespace(trial_id="x"))]


@pytest.mark.parametrize(("world", "available", "copies"), [(8, 2, 4), (8, 1, 8), (8, 3, 3), (4, 1, 4), (2, 2, 1)])
def test_default_concurrency_runs_as_many_ranks_as_the_landscape(world, available, copies):
    from benchmarks.scale_down_accuracy import default_concurrency

    # ceil(W / A) copies of an A-rank replica: 4 x 2 ranks = the landscape's 8 on the same cores (docs/scale_down.md
    # "Fair on a shared CPU"); 3 x 3 = 9 >= 8 where A does not divide W
    assert default_concurrency(world, available) == copies
    with pytest.raises(ValueError, match="available_gpus=0"):
        default_concurrency(world, 0)


def test_concurrent_copies_have_their_own_keys_and_run_directories():
    import dataclasses

    from benchmarks.scale_down_accuracy import _repeat_specs

    @dataclasses.dataclass(frozen=True)
    class Spec:
        trial_id: str

    runs = _repeat_specs("K", Spec("t7"), 2, 3)
    # wave 1 then wave 2, each 3 copies; no key of a sequential run (K, K#r2) and none shared with another concurrency
    assert [k for k, _ in runs] == ["K#c3.1", "K#c3.2", "K#c3.3", "K#r2#c3.1", "K#r2#c3.2", "K#r2#c3.3"]
    assert [s.trial_id for _, s in runs] == ["t7-c3-1", "t7-c3-2", "t7-c3-3", "t7-r2-c3-1", "t7-r2-c3-2", "t7-r2-c3-3"]
    assert {k for k, _ in _repeat_specs("K", Spec("t7"), 1, 4)}.isdisjoint(k for k, _ in runs)


def test_run_waves_submits_a_whole_wave_before_awaiting_and_skips_cached_rows():
    from benchmarks.scale_down_accuracy import run_waves

    events = []

    class Handle:
        def __init__(self, tid):
            self.tid = tid

        def result(self):
            events.append(("await", self.tid))
            return {"status": "ok", "trial": self.tid}

    class Launcher:
        def submit(self, spec):
            events.append(("submit", spec))
            return Handle(spec)

    rows, loads = {"a": {"status": "cached"}}, []
    run_waves(Launcher(), [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")], 2, rows, loads)
    # "a" is cached: b and c go at once (both submitted, then both awaited), d alone after them
    assert events == [("submit", "B"), ("submit", "C"), ("await", "B"), ("await", "C"), ("submit", "D"), ("await", "D")]
    assert rows["a"] == {"status": "cached"} and rows["d"]["trial"] == "D" and len(loads) == 2
