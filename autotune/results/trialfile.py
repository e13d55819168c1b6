"""Build TrialSpecs from a Config, and the round-trip YAML that `autotune export --format autotune` writes and
`autotune bench --config FILE` runs as is. YAML is read with `yaml.safe_load` only (no Python tags)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

from autotune.core.model import ModelSpec
from autotune.core.trial import TrialSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.spec.config import Config, ConfigError

TRIALFILE_VERSION = 1


def make_spec(
    cfg: Config,
    plan: ParallelPlan,
    *,
    sweep_id: str = "adhoc",
    trial_id: str = "t0000",
    backend: str = "local",
    **extra: Any,
) -> TrialSpec:
    """A TrialSpec for one layout of the configured job; `extra` sets TrialSpec fields (warmup_steps, timeout_s, ...)."""
    fields = dict(warmup_steps=cfg.sweep.warmup_steps, timed_steps=cfg.sweep.timed_steps, timeout_s=cfg.sweep.timeout_s)
    # bench_model compiles per block (plan.compile): the compile time falls in the warm-up steps and in the trial's
    # wall time, so the timeout grants it on top (autotune/predict/perf_terms.py)
    if plan.compile:
        from autotune.predict.perf_terms import compile_time_s

        fields["timeout_s"] += float(compile_time_s([True], cfg.cluster)[0])
    fields.update(extra)
    return TrialSpec(
        sweep_id=sweep_id,
        trial_id=trial_id,
        model=cfg.model,
        train=cfg.train,
        cluster=cfg.cluster,
        plan=plan,
        backend=backend,
        **fields,
    )


def dump_trialfile(
    model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan, path: str | Path, comment: str = ""
) -> Path:
    """Write the runnable YAML atomically (temp file + rename)."""
    import yaml

    doc = {
        "autotune_trialfile": TRIALFILE_VERSION,
        "num_gpus": plan.world_size,
        "model": dataclasses.asdict(model),
        "train": dataclasses.asdict(train),
        "cluster": dataclasses.asdict(cluster),
        "plan": dataclasses.asdict(plan),
    }
    header = "".join(f"# {line}\n" for line in comment.splitlines()) if comment else ""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(header + yaml.safe_dump(doc, sort_keys=False))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def load_trialfile(path: str | Path) -> tuple[ModelSpec, TrainSpec, ClusterSpec, ParallelPlan]:
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    except UnicodeDecodeError as e:  # a binary file: name the file, not just the codec
        raise ConfigError(f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    if not isinstance(doc, dict) or doc.get("autotune_trialfile") != TRIALFILE_VERSION:
        raise ConfigError(f"{path}: not an autotune trial file (expected key autotune_trialfile: {TRIALFILE_VERSION})")
    parts = []
    for key, cls in (("model", ModelSpec), ("train", TrainSpec), ("cluster", ClusterSpec), ("plan", ParallelPlan)):
        values = doc.get(key)
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {key} must be a mapping, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"{path}: {key}.{unknown[0]} is not a known field")
        try:
            parts.append(cls(**values))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{path}: {e}") from None
    model, train, cluster, plan = parts
    return model, train, cluster, plan
