"""The sweep controller: plan -> record planner-rejected candidates -> order (predicted best first) -> run through a
launcher -> one row per trial -> live progress -> final ranked table.

Crash safety and resume: every row is written atomically under a trial id derived from its candidate id
(autotune.results.store.trial_id_for), and only once the trial has ended (pruned rows: in one pruned.parquet per sweep,
rewritten atomically per batch). A controller killed at any moment therefore loses at
most the trials in flight (no row yet) and can never have written two rows for one candidate; `--resume DIR` reads the
folder back, skips every candidate that has a row, and runs the rest. A re-run of a candidate (only possible for one
that had no row) replaces its own file.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.core.errors import UsageError
from autotune.results.store import FINISHED, SweepStore

if TYPE_CHECKING:
    from rich.console import Console

    from autotune.search.strategies import Ask, Strategy
    from autotune.spec.config import Config
    from launchers import Launcher, TrialHandle

__all__ = ["SweepRequest", "run_sweep", "flag_overrides"]


@dataclass(frozen=True)
class SweepRequest:
    num_gpus: int | None  # None only with resume (read back from sweep.yaml)
    overrides: tuple[str, ...] = ()  # Hydra overrides, CLI flags already translated (flag_overrides)
    sweep_id: str | None = None
    resume: str | None = None
    resume_if_exists: bool = False
    # Tests and the reliability benchmark only: (i-th trial of this run, fault, timeout_s or None) -> TrialSpec.inject_fault
    inject_faults: tuple[tuple[int, str, float | None], ...] = ()
    memory_limit_bytes: int | None = None  # tests only: TrialSpec.memory_limit_bytes of every trial (a real CPU OOM)
    # scale-down trials (autotune/run/scaledown.py): run each layout of num_gpus as a replica on this many GPUs
    available_gpus: int | None = None
    argv: tuple[str, ...] = field(default=())


def flag_overrides(
    backend: str | None = None,
    strategy: str | None = None,
    max_trials: int | None = None,
    steps: int | None = None,
    parallel: int | None = None,
) -> list[str]:
    """The sweep flags as `sweep.*` overrides, so sweep.yaml's resolved config records them and resume re-reads them."""
    pairs = (
        ("backend", backend),
        ("strategy", strategy),
        ("max_trials", max_trials),
        ("timed_steps", steps),
        ("parallel", parallel),
    )
    return [f"sweep.{k}={v}" for k, v in pairs if v is not None]


def _default_sweep_id(cfg: Config, num_gpus: int) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{cfg.model.name}-{num_gpus}g"


def _available_gpus(req: SweepRequest, store: SweepStore, num_gpus: int, resuming: bool) -> int | None:
    """--available-gpus, or the resumed sweep's; None (full-size trials) when it is absent or not below --gpus."""
    avail = req.available_gpus
    if avail is None and resuming:
        avail = store.read_meta()["args"].get("available_gpus")
    if avail is None or int(avail) >= num_gpus:
        return None
    return int(avail)


def _open_store(req: SweepRequest) -> tuple[SweepStore, int, Config, bool]:
    """(store, num_gpus, config, resuming). A resumed sweep takes its GPUs and resolved config from sweep.yaml; the
    overrides given now apply on top of it (e.g. another --parallel)."""
    from autotune.spec.config import load_config

    if req.resume:
        store = SweepStore(req.resume)
        store.read_meta()  # a clear error when DIR is not a sweep folder
    elif req.sweep_id:
        if "/" in req.sweep_id or req.sweep_id in ("", ".", ".."):
            raise UsageError(f"--sweep-id={req.sweep_id!r} must be a plain folder name (no '/')")
        results_dir = load_config(list(req.overrides)).sweep.results_dir
        store = SweepStore(Path(results_dir) / req.sweep_id)
        if store.exists() and not req.resume_if_exists:
            raise UsageError(
                f"--sweep-id={req.sweep_id!r}: {store.root} already exists; pass --resume {store.root} "
                "or --resume-if-exists"
            )
        # Only empty sub-folders (a controller stopped between mkdir and sweep.yaml) still count as a fresh folder.
        if not store.exists() and store.root.exists() and any(p.is_file() for p in store.root.rglob("*")):
            raise UsageError(f"--sweep-id={req.sweep_id!r}: {store.root} exists and is not a sweep folder")
    else:
        store = None
    if store is not None and store.exists():
        gpus = int(store.read_meta()["args"]["gpus"])
        if req.num_gpus is not None and req.num_gpus != gpus:
            raise UsageError(f"--gpus={req.num_gpus} differs from the resumed sweep's gpus={gpus}")
        extra = req.overrides if req.resume else tuple(o for o in req.overrides if o.startswith("sweep."))
        return store, gpus, store.config(list(extra)), True
    if req.num_gpus is None:
        raise UsageError("--gpus is required (except with --resume)")
    cfg = load_config(list(req.overrides))
    if store is None:
        store = SweepStore(Path(cfg.sweep.results_dir) / _default_sweep_id(cfg, req.num_gpus))
    return store, req.num_gpus, cfg, False


def _make_launcher(cfg: Config, store: SweepStore, num_gpus: int, available: int | None = None) -> Launcher:
    from launchers.base import launcher_from_config, launcher_names

    backend = cfg.sweep.backend
    launcher = launcher_from_config(cfg.sweep, backend, workdir=store.work_dir, log_dir=store.logs_dir)
    limit = launcher.max_world_size()
    if available is not None and limit is not None and available > limit:
        raise UsageError(
            f"--available-gpus={available} exceeds what --backend={backend} provides here ({launcher.describe_limit()})"
        )
    if available is None and limit is not None and num_gpus > limit:
        raise UsageError(
            f"--gpus={num_gpus} exceeds what --backend={backend} provides here "
            f"({launcher.describe_limit()}); use --backend {'|'.join(launcher_names(besides=backend))}"
        )
    return launcher


def _record_planner_rejects(cfg: Config, store: SweepStore, frame: Any, done: dict[str, str], backend: str) -> int:
    """The planner's rejected layouts not yet recorded, as `pruned` rows in the sweep's one pruned.parquet (one
    atomic write for the batch; autotune/results/store.py)."""
    from autotune.layouts.candidate import Candidate
    from autotune.run.rows import pruned_row

    rejected = frame[frame["rank"].isna()]
    rows = []
    for _, row in rejected.iterrows():
        if str(row["candidate_id"]) in done:
            continue
        cand = Candidate.from_row(row)
        reason = cand.reject_reason if cand.reject_reason is not None else "predicted not to fit"
        rows.append(pruned_row(cfg, cand, reason, sweep_id=store.sweep_id, backend=backend))
    store.add_pruned(rows)
    return len(rows)


def _trial_framework(cfg: Config) -> Config:
    """The config the sweep plans its trials with: trials that really run, run bench_model, so a real backend plans
    with bench_model's accounting and limits (the report compares with train.framework's, docs/frameworks.md);
    `--backend simulate` predicts under train.framework itself."""
    import dataclasses

    if cfg.sweep.backend == "simulate" or cfg.train.framework == "bench_model":
        return cfg
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, framework="bench_model"))


def run_sweep(req: SweepRequest, console: Console | None = None) -> Path:
    """Run (or resume) a sweep; returns its folder (the CLI prints its ranked summary). User mistakes raise
    AutotuneError (one line)."""
    from autotune.layouts.planner import NoValidLayoutError, enumerate_candidates, explain_no_layout
    from autotune.search.strategies import get_strategy

    console = console or make_console()
    store, num_gpus, cfg, resuming = _open_store(req)
    frame = enumerate_candidates(_trial_framework(cfg), num_gpus)
    runnable = frame[frame["rank"].notna()].sort_values("rank", kind="stable")
    if runnable.empty:
        raise NoValidLayoutError(explain_no_layout(frame, cfg, num_gpus))
    from autotune.search.strategies.options import strategy_options

    strategy = get_strategy(
        cfg.sweep.strategy,
        runnable,
        cfg.sweep.max_trials,
        seed=cfg.train.seed,
        **strategy_options(cfg, store.root, store.sweep_id),
    )
    created = not resuming and not store.root.exists()
    try:
        available = _available_gpus(req, store, num_gpus, resuming)
        launcher = _make_launcher(cfg, store, num_gpus, available)
    except ValueError:
        if created:  # the launcher made its scratch folders: leave no half-made sweep folder behind
            import shutil

            shutil.rmtree(store.root, ignore_errors=True)
        raise
    if not resuming:
        meta = {"gpus": num_gpus, "overrides": list(req.overrides), "argv": list(req.argv)}
        store.create(cfg.resolved_yaml, {**meta, **({"available_gpus": available} if available else {})})
    console.print(
        f"sweep {store.root}  ({'resuming, ' if resuming else ''}{num_gpus} GPUs, model {cfg.model.name}, "
        f"cluster {cfg.cluster.name}, backend {cfg.sweep.backend}, strategy {cfg.sweep.strategy})"
        + (f"; scale-down trials on {available} GPUs" if available else ""),
        highlight=False,
        soft_wrap=True,
    )
    previous = store.read()
    done = dict(zip(previous["candidate_id"], previous["status"]))
    for _, prow in previous[previous["status"].isin(FINISHED)].iterrows():
        strategy.replay(str(prow["candidate_id"]), {k: (None if _isna(v) else v) for k, v in prow.items()})
    n_pruned = _record_planner_rejects(cfg, store, frame, done, cfg.sweep.backend)
    console.print(
        f"{len(frame)} candidates: {len(runnable)} runnable, {int(frame['rank'].isna().sum())} rejected by "
        f"the planner ({n_pruned} recorded now); {len(strategy.results)} trial(s) already done",
        highlight=False,
    )
    try:
        _loop(cfg, store, launcher, strategy, req, console, available)
    finally:
        launcher.close()
    return store.root


def make_console() -> Console:
    """stdout console; piped output (CI logs, tests) gets a wide fixed width instead of rich's 80 columns."""
    import sys

    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _isna(v: Any) -> bool:
    try:
        return v is None or bool(v != v)
    except (TypeError, ValueError):  # arrays (losses)
        return False


def _loop(
    cfg: Config,
    store: SweepStore,
    launcher: Launcher,
    strategy: Strategy,
    req: SweepRequest,
    console: Console,
    available: int | None = None,
) -> None:
    from autotune.run.progress import SweepProgress, layout_text
    from autotune.run.rows import candidate_spec, pruned_row
    from autotune.run.scaledown import ScaleDown, compose_row, replica_spec
    from autotune.search.oom_pruning import OOM_RULE

    parallel = max(1, int(cfg.sweep.parallel))
    faults = {i: (f, t) for i, f, t in req.inject_faults}
    progress = SweepProgress(console, strategy.planned_total(), parallel, done_before=len(strategy.results))
    progress.seed(strategy.results.values())
    in_flight: dict[str, tuple[Ask, TrialHandle]] = {}  # trial_id -> (ask, handle)
    scaled: dict[str, ScaleDown] = {}  # trial_id -> its scale-down (replica) when the sweep runs them
    started = 0
    from autotune.search.budget import GpuBudget
    from autotune.search.calibrate import OnlineCalibrator

    budget = GpuBudget(cfg.sweep.budget_gpu_hours, store.read())
    calibrator = OnlineCalibrator(cfg, strategy.candidates) if cfg.sweep.calibrate else None
    try:
        while True:
            while len(in_flight) < parallel:
                if budget.exhausted():
                    budget.announce(console)
                    break
                ask = strategy.ask()
                if ask is None:
                    break
                started += 1
                fault, fault_timeout = faults.get(started, ("", None))
                extra: dict[str, Any] = {"inject_fault": fault} if fault else {}
                if fault_timeout is not None:
                    extra["timeout_s"] = fault_timeout
                if ask.timed_steps is not None:
                    extra["timed_steps"] = ask.timed_steps
                if req.memory_limit_bytes is not None:
                    extra["memory_limit_bytes"] = req.memory_limit_bytes
                spec = candidate_spec(
                    cfg, ask.candidate, sweep_id=store.sweep_id, backend=cfg.sweep.backend, rung=ask.rung, **extra
                )
                if available is not None:  # the launcher runs the replica; the row is composed when it ends
                    scaled[spec.trial_id] = replica_spec(spec, available)
                    spec = scaled[spec.trial_id].replica
                in_flight[spec.trial_id] = (ask, launcher.submit(spec))
            if not in_flight:
                return
            progress.running([f"{t} {layout_text(a.candidate.plan)}" for t, (a, _) in in_flight.items()])
            finished = [t for t, (_, h) in in_flight.items() if h.done()]
            if not finished:
                time.sleep(0.2)
                continue
            for trial_id in finished:
                ask, handle = in_flight.pop(trial_id)
                row = handle.result()
                if trial_id in scaled:
                    row = compose_row(scaled.pop(trial_id), row)
                store.write_row(row)
                progress.finished(row)
                budget.add(row)
                if calibrator is not None:
                    calibrator.after_row(row, strategy, lambda msg: console.print(f"  {msg}", highlight=False))
                pruned = [
                    # every strategy prune is OOM dominance today (autotune.search.oom_pruning)
                    pruned_row(
                        cfg, p.candidate, p.reason, sweep_id=store.sweep_id, backend=cfg.sweep.backend, rule=OOM_RULE
                    )
                    for p in strategy.tell(ask, row)
                ]
                store.add_pruned(pruned)  # one write per batch into pruned.parquet
                for prow in pruned:
                    console.print(
                        f"  pruned {prow['trial_id']}: {prow['reject_reason']}", highlight=False, soft_wrap=True
                    )
    except BaseException:
        # Interrupted: stop what runs and write nothing for it, so a resume runs those candidates again.
        for _, handle in in_flight.values():
            handle.cancel()
        raise
    finally:
        progress.stop()
