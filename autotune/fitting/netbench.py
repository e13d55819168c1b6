"""Measure the fabric: time all-reduce, all-gather, reduce-scatter and point-to-point with real torch.distributed
(gloo on CPU, NCCL on GPUs), fit α (latency, s) and β (bandwidth, bytes/s) per link class, and write them into a
cluster preset so the performance model prices communication with the user's real links.

Model: t = steps · α + busbw_factor · n / β — the ring model autotune.predict.perf.ring_s prices collectives with, so the
fitted numbers mean there exactly what they meant here. n is the buffer size in bytes; the bus factor converts the
algorithm's data volume to what crosses each link (nccl-tests doc/PERFORMANCE.md: all-reduce 2(g-1)/g, all-gather,
reduce-scatter and all-to-all (g-1)/g with n the full buffer, send/recv 1); steps are the ring's latency-bound hops
(all-reduce 2(g-1), all-gather, reduce-scatter and all-to-all g-1, send/recv 1). The all-to-all's (g-1)/g * n / beta
+ (g-1) alpha is how autotune.predict.moe.a2a_s prices the MoE dispatch. One (α, β) pair then describes a link class
across collectives and group sizes.

CPU seconds: every sample also carries the busiest member's CPU seconds per collective (time.process_time, all
threads), and `NetbenchResult.cpu_fits` fits the same model to them on each link class's widest group (every rank
busy at once, as in a training step): what a collective costs a CPU (gloo) rank in CPU time, the basis scale-down
trials on CPU ranks are composed in (docs/scale_down.md; `cpu_time_cluster`).

Link classes: `intra` (ranks on one host / NVLink) and `inter` (across nodes). The ranks run
`autotune.fitting.netbench_rank` through the sweep's launchers (local, slurm, ray), which picks the groups from the ranks'
hostnames. When every rank is on one host only the intra class is measurable; the preset keeps its inter-node numbers
and `NetbenchResult.notes` says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError, UsageError
from autotune.fitting.netbench_rank import COLLECTIVES

DEFAULT_SIZES_BYTES: tuple[int, ...] = (1 << 12, 1 << 16, 1 << 20, 1 << 22)


def ring_steps(collective: str, group_size: int) -> int:
    """Latency-bound hops of a ring collective (autotune.predict.perf.ring_s)."""
    bus_factor(collective, group_size)  # validates the name
    g = group_size
    return 2 * (g - 1) if collective == "all_reduce" else (1 if collective == "p2p" else g - 1)


def bus_factor(collective: str, group_size: int) -> float:
    """nccl-tests PERFORMANCE.md: busbw = algbw × factor."""
    g = group_size
    if collective == "all_reduce":
        return 2.0 * (g - 1) / g
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (g - 1) / g
    if collective == "p2p":
        return 1.0
    raise ValueError(f"collective={collective!r} must be one of {', '.join(COLLECTIVES)}")


@dataclass(frozen=True)
class Sample:
    collective: str
    link_class: str
    group_size: int
    size_bytes: int
    time_s: float
    cpu_time_s: float | None = (
        None  # the busiest member's CPU seconds per collective (process_time); None if not recorded
    )


@dataclass(frozen=True)
class LinkFit:
    link_class: str
    latency_s: float
    bw_bytes_per_s: float
    num_samples: int
    rel_rms_error: float


@dataclass(frozen=True)
class NetbenchResult:
    world_size: int
    backend: str
    samples: tuple[Sample, ...]
    fits: dict[str, LinkFit]
    per_collective: dict[str, LinkFit] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    cpu_fits: dict[str, LinkFit] = field(default_factory=dict)  # the same fit on CPU seconds per link class
    # FSDP2's all-gathers / reduce-scatters timed as FSDP2 issues them (autotune/fitting/netbench_fsdp.py) and the ring
    # alpha-beta fitted to their CPU seconds per call (alpha: CPU s per ring step, beta: bytes per CPU s)
    fsdp_samples: tuple[Sample, ...] = ()
    fsdp_cpu_fits: dict[str, LinkFit] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "notes": list(self.notes),
            "fits": {k: dataclasses.asdict(v) for k, v in self.fits.items()},
            "per_collective": {k: dataclasses.asdict(v) for k, v in self.per_collective.items()},
            "cpu_fits": {k: dataclasses.asdict(v) for k, v in self.cpu_fits.items()},
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "fsdp_cpu_fits": {k: dataclasses.asdict(v) for k, v in self.fsdp_cpu_fits.items()},
            "fsdp_samples": [dataclasses.asdict(s) for s in self.fsdp_samples],
        }


def fit_alpha_beta(samples: list[Sample], link_class: str, basis: str = "time_s") -> LinkFit:
    """Bounded least squares for t = k·α + x/β with k = ring steps, x = bus_factor·n, α >= 0, 1/β > 0. Relative
    residuals (each sample divided by its time) so the small-message latency counts as much as the large-message
    bandwidth. `basis`: the Sample field fitted, wall `time_s` or `cpu_time_s`."""
    import numpy as np

    x = np.array([bus_factor(s.collective, s.group_size) * s.size_bytes for s in samples], dtype=float)
    t = np.array([getattr(s, basis) for s in samples], dtype=float)
    k = np.array([ring_steps(s.collective, s.group_size) for s in samples], dtype=float)
    if len(samples) < 2 or np.ptp(x) == 0:
        raise AutotuneError(
            f"netbench: link class {link_class!r} needs samples at >= 2 message sizes to fit alpha and beta"
        )
    w = 1.0 / t
    a_mat = np.stack([k, x], axis=1) * w[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(a_mat, t * w, rcond=None)
    if alpha < 0:  # bound active: refit bandwidth alone through the origin
        alpha, inv_beta = 0.0, float(np.sum(w * x * w * t) / np.sum((w * x) ** 2))
    if inv_beta <= 0:  # latency-dominated over the whole range: bandwidth unmeasurable, take the largest message's
        inv_beta = float(np.max(t / x))
        alpha = float(max(0.0, np.min((t - x * inv_beta) / k)))
    pred = k * alpha + x * inv_beta
    rel = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return LinkFit(link_class, float(alpha), float(1.0 / inv_beta), len(samples), rel)


def fit_result(
    world_size: int,
    backend: str,
    raw_samples: list[dict[str, Any]],
    hosts: int,
    raw_fsdp: list[dict[str, Any]] | None = None,
) -> NetbenchResult:
    """Fit (α, β) per link class that has samples at >= 2 sizes, and per collective within the intra class; the
    FSDP2-issued samples (`raw_fsdp`, netbench_fsdp.py) get their own CPU-time fit per parameter kind (`intra`: plain
    tensors, `intra_tp2`: tp-sharded DTensors) over every group size timed (every rank busy at each)."""
    samples = tuple(Sample(**s) for s in raw_samples)
    fsdp = tuple(Sample(**s) for s in raw_fsdp or ())
    fsdp_fits = {}
    for link in sorted({s.link_class for s in fsdp}):  # intra (plain parameters), intra_tp2 (tp-sharded DTensors)
        timed = [s for s in fsdp if s.link_class == link and s.cpu_time_s]
        if len({s.size_bytes for s in timed}) >= 2:
            fsdp_fits[link] = fit_alpha_beta(timed, link, basis="cpu_time_s")
    fits = {
        link: fit_alpha_beta([s for s in samples if s.link_class == link], link)
        for link in ("intra", "inter")
        if any(s.link_class == link for s in samples)
    }
    by_op = {
        op: fit_alpha_beta([s for s in samples if s.collective == op and s.link_class == "intra"], op)
        for op in COLLECTIVES
        if any(s.collective == op and s.link_class == "intra" for s in samples)
    }
    cpu_fits = {}
    for link in ("intra", "inter"):
        # CPU seconds on the class's largest group only: there every rank of the class is busy at once, as in a
        # training step, whereas a 2-rank group leaves the others idle and its hops cost less CPU (fewer runnable
        # processes per core to wake and refill caches for: 150-500 us vs 80-400 us per hop, 8 ranks on 2 cores)
        timed = [s for s in samples if s.link_class == link and s.cpu_time_s is not None and s.cpu_time_s > 0]
        widest = [s for s in timed if s.group_size == max((t.group_size for t in timed), default=0)]
        if len({s.size_bytes for s in widest}) >= 2:
            cpu_fits[link] = fit_alpha_beta(widest, link, basis="cpu_time_s")
    notes = (
        ()
        if "inter" in fits
        else (
            f"{hosts} host(s): only the intra-node link class is measurable; inter-node alpha/beta keep the preset's values",
        )
    )
    return NetbenchResult(world_size, backend, samples, fits, by_op, notes, cpu_fits, fsdp, fsdp_fits)


def run_netbench(
    num_ranks: int,
    sizes_bytes: tuple[int, ...] = DEFAULT_SIZES_BYTES,
    iters: int = 5,
    warmup: int = 2,
    *,
    cfg: Any = None,
    backend: str = "local",
    workdir: str | Path | None = None,
    timeout_s: float = 600.0,
) -> NetbenchResult:
    """Start `num_ranks` ranks of `autotune.fitting.netbench_rank` through the sweep's own launchers (`local`: torchrun on
    this host; `slurm`: one job, one task per rank; `ray`: a placement group), time every collective, fit α/β.
    `workdir` must be on a filesystem every rank sees (the trial protocol's files); default a temporary folder."""
    if num_ranks < 2:
        raise UsageError(f"--gpus={num_ranks} must be >= 2 (a collective needs two ranks)")
    from autotune.fitting.netbench_rank import SIDECAR_SUFFIX
    from autotune.spec.config import load_config

    raw = run_measurement_trial(
        cfg if cfg is not None else load_config([]),
        num_ranks,
        what="netbench",
        measures="real links",
        sidecar_suffix=SIDECAR_SUFFIX,
        failure=NetbenchFailed,
        backend=backend,
        workdir=workdir,
        timeout_s=timeout_s,
        netbench={"sizes_bytes": list(sizes_bytes), "iters": iters, "warmup": warmup},
    )
    return fit_result(num_ranks, raw["backend"], raw["samples"], len(raw["hosts"]), raw.get("fsdp_samples"))


def run_measurement_trial(
    cfg: Any,
    num_ranks: int,
    *,
    what: str,
    measures: str,
    sidecar_suffix: str,
    failure: type[Exception],
    backend: str,
    workdir: str | Path | None,
    timeout_s: float,
    **spec_fields: Any,
) -> dict[str, Any]:
    """One trial of `autotune.fitting.<what>_rank` on `num_ranks` ranks started by the sweep's launchers (netbench,
    devbench); returns the JSON rank 0 wrote beside the trial's result file (`sidecar_suffix`), or raises `failure`
    in one line when the ranks did not end ok."""
    from autotune.core.types import ParallelPlan
    from autotune.results.trialfile import make_spec
    from launchers.base import SIMULATED, launcher_from_config, launcher_names

    if backend in SIMULATED:
        raise UsageError(
            f"--backend={backend}: {what} measures {measures}; use {' or '.join(launcher_names(measuring=True))}"
        )
    with tempfile.TemporaryDirectory(prefix=f"{what}-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        module = f"autotune.fitting.{what}_rank"
        launcher = launcher_from_config(
            cfg.sweep, backend, workdir=root / "trials", log_dir=root / "logs", module=module
        )
        try:
            limit = launcher.max_world_size()
            if limit is not None and num_ranks > limit:
                raise UsageError(f"--gpus={num_ranks} exceeds what --backend={backend} provides here ({limit} ranks)")
            plan = ParallelPlan(dp=num_ranks)
            spec = make_spec(
                cfg, plan, sweep_id=what, trial_id=what, backend=backend, timeout_s=timeout_s, **spec_fields
            )
            handle = launcher.submit(spec)
            row = handle.result(timeout=timeout_s + 600.0)  # + queueing and start-up
            sidecar = Path(str(handle.result_path) + sidecar_suffix)
            if row["status"] != "ok" or not sidecar.exists():
                raise failure(
                    f"{what} ranks ended with status={row['status']} "
                    f"({row['error_type']}: {row['error_message']}); log: {row['log_path']}"
                )
            return json.loads(sidecar.read_text())
        finally:
            launcher.close()


class NetbenchFailed(RuntimeError):
    """The measurement itself failed (a rank crashed, the job timed out): not bad input, but one line all the same."""


def apply_to_cluster(cluster: Any, result: NetbenchResult) -> Any:
    """The ClusterSpec with measured links. Measured bandwidth is what the links really deliver, so comm_efficiency
    becomes 1.0 (the perf model multiplies bandwidth by it)."""
    changes: dict[str, Any] = {"comm_efficiency": 1.0}
    if "intra" in result.fits:
        changes.update(
            intra_node_bw_bytes_per_s=result.fits["intra"].bw_bytes_per_s,
            intra_node_latency_s=result.fits["intra"].latency_s,
        )
    if "inter" in result.fits:
        changes.update(
            inter_node_bw_bytes_per_s=result.fits["inter"].bw_bytes_per_s,
            inter_node_latency_s=result.fits["inter"].latency_s,
        )
    return dataclasses.replace(cluster, **changes)


def cpu_time_cluster(cluster: Any, result: NetbenchResult) -> Any:
    """The ClusterSpec whose links price a collective in CPU seconds per rank (`result.cpu_fits`): the cost basis of
    scale-down trials on CPU ranks (autotune/predict/compose.py, docs/scale_down.md). A collective's CPU time is spent
    whether or not its wait overlaps compute, so nothing is hidden (dp_overlap 0) and comm_efficiency is 1."""
    if "intra" not in result.cpu_fits:
        raise AutotuneError("netbench: no CPU-time samples to fit (ranks that predate cpu_time_s)")
    intra = result.cpu_fits["intra"]
    inter = result.cpu_fits.get("inter", intra)  # one host: gloo's CPU cost per byte does not depend on the link
    return dataclasses.replace(
        cluster,
        comm_efficiency=1.0,
        dp_overlap=0.0,
        intra_node_bw_bytes_per_s=intra.bw_bytes_per_s,
        intra_node_latency_s=intra.latency_s,
        inter_node_bw_bytes_per_s=inter.bw_bytes_per_s,
        inter_node_latency_s=inter.latency_s,
    )


def fsdp_cpu_cluster(cluster: Any, result: NetbenchResult, tp: int = 1) -> Any:
    """`cpu_time_cluster` with the links of FSDP2-issued collectives (`result.fsdp_cpu_fits`): what the step model's
    ZeRO-2/3 term (perf_dp.py `fsdp_s`: its count of all-gathers and reduce-scatters, ring steps and bytes) costs a CPU
    rank per step when priced with it. The composition prices a target's FSDP2 traffic with it where the replica ran
    no data-parallel rank (autotune/predict/compose.py); None when netbench timed no FSDP2 collective. `tp`: the
    target's tensor-parallel degree; the fit of the largest tp-sharded unit measured that is <= tp (plain at tp 1)."""
    from autotune.fitting.netbench_fsdp import fsdp_link_class

    fits = [t for t in (16, 8, 4, 2, 1) if t <= tp and fsdp_link_class(t) in result.fsdp_cpu_fits]
    if not fits:
        return None
    return cpu_cluster_with_fit(cluster, result, result.fsdp_cpu_fits[fsdp_link_class(fits[0])])


def cpu_cluster_with_fit(cluster: Any, result: NetbenchResult, fit: Any) -> Any:
    """`cpu_time_cluster` with every link priced by one α-β fit (a collective's or FSDP2's own CPU cost)."""
    return dataclasses.replace(
        cpu_time_cluster(cluster, result),
        intra_node_bw_bytes_per_s=fit.bw_bytes_per_s,
        intra_node_latency_s=fit.latency_s,
        inter_node_bw_bytes_per_s=fit.bw_bytes_per_s,
        inter_node_latency_s=fit.latency_s,
    )


def check_preset_path(path: str | Path, flag: str = "-o") -> Path:
    """Refuse, before any work, a preset path the config tree could never load (Hydra reads `<name>.yaml`)."""
    path = Path(path)
    if path.suffix != ".yaml" or path.stem in ("", ".") or path.is_dir():
        raise UsageError(f"{flag}={str(path)!r} must be a file name ending in .yaml (a cluster preset)")
    return path


def preset_usage(path: Path) -> str:
    """How to use a written preset: `cluster=<stem>` from the config tree's cluster/ folder, `cluster=<path>` anywhere."""
    from autotune.spec.config import SEARCH_SPACES

    if path.resolve().parent == (SEARCH_SPACES / "cluster").resolve():
        return f"use: cluster={path.stem}"
    return f"use: cluster={path}"


def write_cluster_preset(cluster: Any, path: str | Path, header: str) -> Path:
    """A preset YAML that `cluster=<stem>` loads: every ClusterSpec field, a comment header saying where the numbers
    came from. Written atomically; the preset's `name` is the file stem so the config tree finds it."""
    import yaml

    path = Path(path)
    doc = dataclasses.asdict(dataclasses.replace(cluster, name=path.stem))
    text = "".join(f"# {line}\n" for line in header.strip().splitlines()) + yaml.safe_dump(doc, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path
