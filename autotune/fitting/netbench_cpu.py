"""CPU-time link fits beyond netbench.py's pooled one (docs/scale_down.md "Fair on a shared CPU"): one collective's
own fit (the all-to-all of a shrunk expert-parallel group), and the fits a cluster preset stores so that a sweep's
scale-down rows on CPU ranks price the collectives their replica did not run in CPU seconds, as
benchmarks/scale_down_accuracy.py does (ClusterSpec CPU_COMM_FIELDS)."""

from __future__ import annotations

import dataclasses
from typing import Any

from autotune.fitting.netbench import NetbenchResult, cpu_cluster_with_fit, fit_alpha_beta
from autotune.predict.compose import preset_cpu_clusters  # noqa: F401  (re-exported: it reads what store_cpu_fits writes)


def collective_cpu_cluster(cluster: Any, result: NetbenchResult, collective: str) -> Any:
    """`cpu_time_cluster` with the links fitted to one collective's CPU seconds per rank alone (the same ring alpha-beta,
    on the widest group timed: every rank busy), e.g. `all_to_all` for the expert-parallel dispatch / combine a
    scale-down composition prices when the replica's ep group is shrunk (autotune/predict/compose.py `ep_cluster`);
    None when netbench timed that collective at fewer than 2 sizes."""
    timed = [s for s in result.samples if s.collective == collective and s.link_class == "intra" and s.cpu_time_s]
    widest = [s for s in timed if s.group_size == max((t.group_size for t in timed), default=0)]
    if len({s.size_bytes for s in widest}) < 2:
        return None
    return cpu_cluster_with_fit(cluster, result, fit_alpha_beta(widest, collective, basis="cpu_time_s"))


def store_cpu_fits(cluster: Any, result: NetbenchResult) -> Any:
    """`cluster` with the CPU-time fits of `result` in its CPU_COMM_FIELDS (the bare collectives' intra fit, the
    FSDP2-issued plain and tp-sharded ones), so that a sweep's scale-down rows price in CPU seconds as the benchmark
    does (autotune/run/scaledown.py `preset_cpu_clusters`); fits netbench did not make stay as they were."""
    changes = {}
    for prefix, fit in (
        ("cpu_comm", result.cpu_fits.get("intra")),
        ("fsdp_cpu", result.fsdp_cpu_fits.get("intra")),
        ("fsdp_tp_cpu", result.fsdp_cpu_fits.get("intra_tp2")),
    ):
        if fit is not None and fit.latency_s > 0:
            changes.update({f"{prefix}_latency_s": fit.latency_s, f"{prefix}_bw_bytes_per_s": fit.bw_bytes_per_s})
    return dataclasses.replace(cluster, **changes)
