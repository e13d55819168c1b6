"""Compose `search_spaces/` with Hydra's compose API and turn it into frozen dataclasses.

This is the only module that touches a Hydra `DictConfig`; everything downstream receives `Config`. Every user
mistake becomes a `ConfigError` (a ValueError) whose message names the field, the value and the rule.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import default_pp_schedule
from autotune.core.types import (
    INT_FIELDS,
    PLAN_DEFAULTS,
    PLAN_DIMS,
    PLAN_FIELDS,
    PLAN_KINDS,
    ClusterSpec,
    ParallelPlan,
    TrainSpec,
    domain_problem,
)

SEARCH_SPACES = Path(os.environ.get("AUTOTUNE_SEARCH_SPACES", Path(__file__).resolve().parents[2] / "search_spaces"))
GROUPS = ("model", "cluster", "space", "train", "sweep", "experiment")


class ConfigError(AutotuneError):
    """A user mistake in the configuration; the CLI prints it as one line and exits 2."""


# The search space lists every plan field the planner does not derive (Dim.derived): one tuple of values each, its
# type and checks from the field's Dim. The default is the plan's default alone (a space holding the field there);
# search_spaces/space/default.yaml lists wider values for the fields that are not opt-in (Dim.opt_in). dp alone may
# be null: whatever completes dp*tp*pp*cp = num_gpus.
SPACE_FIELDS: tuple[str, ...] = tuple(n for n in PLAN_FIELDS if not PLAN_DIMS[n].derived)
_SpaceDims = dataclasses.make_dataclass(
    "_SpaceDims",
    [
        (n, f"tuple[{PLAN_KINDS[n]}, ...]", field(default=None if n == "dp" else (PLAN_DEFAULTS[n],)))
        for n in SPACE_FIELDS
    ],
    frozen=True,
)


@dataclass(frozen=True)
class SpaceSpec(_SpaceDims):
    """The values each plan field may take (SPACE_FIELDS, generated) and the switches of the rules and the ranking."""

    tp_within_node: bool = True
    dp_shard_within_node: bool = True
    allow_uneven_pp: bool = True
    memory_headroom: float = 0.05
    min_margin_sigma: float = 0.0  # rank layouts with a smaller memory margin (autotune/predict/margin.py) last

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.memory_headroom) < 1.0:
            raise ConfigError(f"space.memory_headroom={self.memory_headroom!r} must be within [0, 1)")
        m = self.min_margin_sigma
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 0:
            raise ConfigError(f"space.min_margin_sigma={m!r} must be a number >= 0 (sigmas of reserved-memory error)")


@dataclass(frozen=True)
class SweepSpec:
    backend: str = "local"
    strategy: str = "topk"
    max_trials: int = 8
    warmup_steps: int = 2
    timed_steps: int = 3
    parallel: int = 1
    timeout_s: float = 600.0
    results_dir: str = "results"
    # backend blocks, passed to the launcher as options and checked there (launchers/sbatch.py, launchers/ray_launcher.py)
    slurm: dict[str, Any] = field(default_factory=dict)
    ray: dict[str, Any] = field(default_factory=dict)
    # search strategy options, read by autotune/search/strategies/options.py, autotune/search/budget.py, autotune/search/calibrate.py
    objective: str = "throughput"
    storage: str | None = None
    halving_steps: Any = (1, 3, 9)
    halving_eta: int = 3
    halving_pool: int | None = None
    budget_gpu_hours: float | None = None
    calibrate: bool = True

    def __post_init__(self) -> None:
        for name in ("max_trials", "timed_steps", "parallel"):
            if getattr(self, name) < 1:
                raise ConfigError(f"sweep.{name}={getattr(self, name)!r} must be an integer >= 1")
        if self.warmup_steps < 0:
            raise ConfigError(f"sweep.warmup_steps={self.warmup_steps!r} must be an integer >= 0")
        if not self.timeout_s > 0:
            raise ConfigError(f"sweep.timeout_s={self.timeout_s!r} must be a number > 0")


@dataclass(frozen=True)
class Config:
    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    space: SpaceSpec
    sweep: SweepSpec
    plan_fields: dict[str, Any]  # raw `plan.*` (None = derive); see `plan()`
    overrides: tuple[str, ...]
    resolved_yaml: str

    def plan(self, num_gpus: int | None = None) -> ParallelPlan:
        """The `plan.*` layout with dp and grad_accum_steps derived where null."""
        f = dict(self.plan_fields)
        inner = f["tp"] * f["pp"] * f["cp"]
        if f["dp"] is None:
            if num_gpus is None:
                f["dp"] = 1
            elif num_gpus % inner:
                raise ConfigError(f"plan.tp*pp*cp={inner} does not divide num_gpus={num_gpus}")
            else:
                f["dp"] = num_gpus // inner
        elif num_gpus is not None and f["dp"] * inner != num_gpus:
            raise ConfigError(
                f"plan.dp({f['dp']}) * tp({f['tp']}) * pp({f['pp']}) * cp({f['cp']}) "
                f"= {f['dp'] * inner} != num_gpus({num_gpus})"
            )
        if f["grad_accum_steps"] is None:
            per_step = f["dp"] * f["micro_batch_size"]
            gbs = self.train.global_batch_size
            if gbs % per_step:
                raise ConfigError(
                    f"train.global_batch_size={gbs} is not divisible by "
                    f"dp*micro_batch_size={f['dp']}*{f['micro_batch_size']}={per_step}"
                )
            f["grad_accum_steps"] = gbs // per_step
        if f["pp_schedule"] is None:
            f["pp_schedule"] = default_pp_schedule(f["pp"], f["vpp"], f["grad_accum_steps"])
        try:
            return ParallelPlan(**f)
        except (TypeError, ValueError) as e:
            raise ConfigError(str(e)) from None


def load_config(overrides: list[str] | tuple[str, ...] = (), config_dir: Path | str | None = None) -> Config:
    cfg = _compose(list(overrides), Path(config_dir) if config_dir else SEARCH_SPACES)
    from omegaconf import OmegaConf

    try:
        raw = OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:  # interpolation errors name the key
        raise ConfigError(f"config does not resolve: {_first_line(e)}") from None
    resolved_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    assert isinstance(raw, dict)
    try:
        model = _model_from(raw["model"])
        train = _train_from(raw["train"])
        if train.pp_layout is not None:  # the layout's decoders and MTP modules against the model's (Megatron's checks)
            from autotune.core.pp_layout import check_pp_layout

            check_pp_layout(train.pp_layout, model.num_layers, train.mtp_num_layers)
        cluster = _build(ClusterSpec, raw["cluster"], "cluster")
        space = _space_from(raw["space"], cluster, model)
        sweep = _build(SweepSpec, raw["sweep"], "sweep")
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    if raw["model"].get("config_path") is not None:  # save the imported dims, not a path relative to cwd
        from autotune.spec.hf_import import freeze_resolved_yaml

        resolved_yaml = freeze_resolved_yaml(resolved_yaml, model)
    plan_fields = dict(raw.get("plan") or {})
    _check_plan_types(plan_fields)
    return Config(
        model=model,
        cluster=cluster,
        train=train,
        space=space,
        sweep=sweep,
        plan_fields=plan_fields,
        overrides=tuple(overrides),
        resolved_yaml=resolved_yaml,
    )


def _compose(overrides: list[str], config_dir: Path):
    from autotune.spec.preset_paths import overlay, path_presets

    overrides, picked = path_presets(overrides)
    if not picked:
        return _compose_in(overrides, config_dir)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="autotune-presets-") as tmp:
        return _compose_in(overrides, overlay(config_dir, picked, Path(tmp)))


def _compose_in(overrides: list[str], config_dir: Path):
    import yaml
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_explain_hydra_error(e, overrides, config_dir)) from None
    except yaml.YAMLError as e:  # a preset file with a python tag or broken syntax (Hydra loads with a SafeLoader)
        mark = getattr(e, "problem_mark", None)
        where = f"{mark.name}, line {mark.line + 1}" if mark is not None else "a config file"
        raise ConfigError(f"{where}: not valid YAML ({getattr(e, 'problem', None) or _first_line(e)})") from None
    finally:
        GlobalHydra.instance().clear()


def _explain_hydra_error(e: Exception, overrides: list[str], config_dir: Path) -> str:
    msg = str(e)
    for ov in overrides:
        key, _, value = ov.lstrip("+~").partition("=")
        if key in GROUPS and f"{key}/{value}" in msg or (key in GROUPS and "Could not find" in msg and value in msg):
            presets = sorted(p.stem for p in (config_dir / key).glob("*.yaml"))
            return (
                f"{key}={value!r} is not a preset (choose from: {', '.join(presets)}; or give the path of a YAML file)"
            )
    if "not in struct" in msg or "Could not override" in msg:
        key = msg.split("'")[1] if "'" in msg else msg
        from autotune.spec.preset_paths import known_keys

        near = difflib.get_close_matches(key, known_keys(config_dir, GROUPS), n=1, cutoff=0.75)
        hint = f"did you mean {near[0]}? " if near else ""
        return f"{key}: unknown config key ({hint}see `autotune plan --help` and search_spaces/)"
    if (
        "mismatched input" in msg
        or "no viable alternative" in msg
        or "extraneous input" in msg
        or "Error parsing override" in msg
    ):
        why = [ln for ln in msg.splitlines() if ln.strip() and not ln.startswith(("See https://", "Error parsing"))]
        return (
            f"override {getattr(e, 'override', '')!r} could not be parsed (expected KEY=VALUE): "
            f"{why[0] if why else _first_line(e)}"
        )
    return _first_line(e)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _build(cls: type, values: dict[str, Any], prefix: str) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown key (known: {', '.join(sorted(names))})")
    _check_types(cls, values, prefix)
    return cls(**values)


def _check_types(cls: type, values: dict[str, Any], prefix: str) -> None:
    """Scalars from YAML/CLI must have the declared kind: an int field refuses '8x', 2.5 and true."""
    for f in dataclasses.fields(cls):
        if f.name not in values or values[f.name] is None:
            continue
        v, t = values[f.name], str(f.type)
        if t.startswith("int") and (isinstance(v, bool) or not isinstance(v, int)):
            raise ConfigError(f"{prefix}.{f.name}={v!r} must be an integer")
        if t.startswith("float") and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ConfigError(f"{prefix}.{f.name}={v!r} must be a number")
        if t == "bool" and not isinstance(v, bool):
            raise ConfigError(f"{prefix}.{f.name}={v!r} must be true or false")


def _model_from(values: dict[str, Any]) -> ModelSpec:
    values = dict(values)
    path = values.pop("config_path", None)
    values.pop("default_seq_len", None)
    values.pop("default_global_batch_size", None)
    if path is not None:
        from autotune.spec.hf_import import model_from_hf_config  # model=hf model.config_path=...

        return model_from_hf_config(path, name=values.get("name"))
    return _build(ModelSpec, values, "model")


_PRECISION_DTYPES = {
    "bf16": dict(param_dtype="fp32", compute_dtype="bf16", grad_dtype="fp32"),
    "fp32": dict(param_dtype="fp32", compute_dtype="fp32", grad_dtype="fp32"),
}


def _train_from(values: dict[str, Any]) -> TrainSpec:
    values = dict(values)
    precision = values.get("precision", "bf16")
    if precision not in _PRECISION_DTYPES:
        raise ConfigError(f"train.precision={precision!r} must be one of bf16, fp32")
    for k, v in _PRECISION_DTYPES[precision].items():
        if values.get(k) is None:
            values[k] = v
    tokens = values.pop("global_batch_tokens", None)
    if tokens is not None:
        seq = values["seq_len"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ConfigError(f"train.global_batch_tokens={tokens!r} must be an integer >= 1")
        if isinstance(seq, int) and seq > 0 and tokens % seq:
            raise ConfigError(f"train.global_batch_tokens={tokens} is not a multiple of train.seq_len={seq}")
        values["global_batch_size"] = tokens // seq
    return _build(TrainSpec, values, "train")


def _as_tuple(name: str, v: Any) -> tuple:
    """`space.<name>`'s values, each checked against the plan field's domain (autotune.core.types.domain_problem)."""
    items = v if isinstance(v, (list, tuple)) else [v]
    if not items:
        raise ConfigError(f"space.{name}=[] must list at least one value")
    kind = PLAN_KINDS[name]
    for x in items:
        problem = domain_problem(name, x)
        if problem is None:
            continue
        if kind == "str" and isinstance(x, str):
            raise ConfigError(f"space.{name}={x!r} must be {problem}")
        dim = PLAN_DIMS[name]
        rule = {"bool": "true/false", "str": "strings"}.get(kind) or (
            f"integers in 0..{dim.maximum}" if dim.maximum is not None else problem.replace("an integer", "integers")
        )
        raise ConfigError(f"space.{name}={v!r} must list {rule}")
    return tuple(items)


# space.compile=null: the cluster's default. On CUDA torch.compile per block pays (one H200, Llama-3.2-1B, seq 4096:
# +19% tok/s at mbs 2, +22% at mbs 4, benchmarks/data/measured/h200_bench_model_2026-11.csv); on CPU Inductor needs a
# C++ toolchain and its start-up dominates the short trials the cpu preset runs (docs/memory_model.md, "torch.compile").
COMPILE_DEFAULT = {"cuda": (True,), "cpu": (False,)}


def default_fp8_values(cluster: ClusterSpec | None) -> tuple[str, ...]:
    """space.fp8=null: the cluster's default. Blackwell presets (a `peak_flops_mxfp8`) search bf16 and MXFP8: NVIDIA's
    published Blackwell pre-training recipes run MXFP8 (NeMo / Megatron-Bridge performance summary: the FP8 rows on
    B200/GB200/B300/GB300 are MXFP8), so a layout search there without it would miss what teams run. Every other
    preset keeps bf16 only: tensorwise/rowwise change numerics and are searched only when listed."""
    if cluster is not None and cluster.peak_flops_mxfp8:
        return ("none", "mxfp8")
    return ("none",)


def default_ep_values(model: ModelSpec | None) -> tuple[int, ...]:
    """space.ep=null: every power of two that divides the experts (each ep rank holds whole experts), [1] for a dense
    model (expert parallelism has nothing to split)."""
    if model is None or not model.is_moe:
        return (1,)
    return tuple(2**i for i in range(model.num_experts.bit_length()) if model.num_experts % 2**i == 0)


def _space_from(
    values: dict[str, Any], cluster: ClusterSpec | None = None, model: ModelSpec | None = None
) -> SpaceSpec:
    values = dict(values)
    out: dict[str, Any] = {}
    for name in SPACE_FIELDS:
        if name not in values:
            continue
        v = values.pop(name)
        if v is None and name == "dp":  # whatever completes dp*tp*pp*cp = num_gpus
            out[name] = None
        elif v is None and name == "compile":  # an explicit list stays authoritative; null follows the cluster
            out[name] = COMPILE_DEFAULT[cluster.device_type] if cluster is not None else (False,)
        elif v is None and name == "fp8":  # null follows the cluster: MXFP8 too where it runs (Blackwell)
            out[name] = default_fp8_values(cluster)
        elif v is None and name == "ep":  # null follows the model: its experts' divisors, or 1 on a dense model
            out[name] = default_ep_values(model)
        else:
            out[name] = _as_tuple(name, v)
    out.update(values)
    return _build(SpaceSpec, out, "space")


def _check_plan_types(f: dict[str, Any]) -> None:
    known = {x.name for x in dataclasses.fields(ParallelPlan)}
    unknown = sorted(set(f) - known)
    if unknown:
        raise ConfigError(f"plan.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    for k in INT_FIELDS:
        v = f.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ConfigError(f"plan.{k}={v!r} must be an integer")
