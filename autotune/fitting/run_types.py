"""The types the reference-run loaders share (autotune.fitting.reference_runs, autotune.fitting.nemo_runs): where the
copied public tables live, a mapped row, a skipped row, a model preset as a ModelSpec."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "measured"
MODELS = Path(__file__).resolve().parents[2] / "search_spaces" / "model"
SOURCES = (
    "llmfoundry", "nemo", "megatron", "h200_bench", "h200_bench_1125", "h200_bench_1129", "moe_public", "torchtitan",
)  # fmt: skip


@dataclass(frozen=True)
class ReferenceRun:
    source: str  # one of SOURCES
    row: int  # 0-based row of the source CSV
    model: ModelSpec
    train: TrainSpec
    cluster: str  # search_spaces/cluster/<cluster>.yaml
    plan: ParallelPlan
    measured_tokens_per_s_per_gpu: float
    # why the row is predicted and scored but not fitted ("" = fitted): hardware the source says differs from its
    # preset in a way no preset field states (fit_reference.fit_all drops these rows; model_accuracy scores them)
    fit_excluded: str = ""

    @property
    def num_gpus(self) -> int:
        return self.plan.world_size


@dataclass(frozen=True)
class SkippedRow:
    source: str
    row: int
    reason: str


def preset_model(name: str) -> ModelSpec:
    """A model preset (search_spaces/model/<name>.yaml) as a ModelSpec: every ModelSpec field it sets (MoE and MLA
    fields included), without the preset's sweep defaults."""
    raw = yaml.safe_load((MODELS / f"{name}.yaml").read_text())
    fields = {f.name for f in dataclasses.fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in raw.items() if k in fields})
