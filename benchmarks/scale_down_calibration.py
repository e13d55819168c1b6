"""The calibration step of benchmarks/scale_down_accuracy.py (issue 27): `autotune netbench` on the landscape's world,
each collective's CPU seconds per rank fitted to the ring alpha-beta (docs/scale_down.md "Fair on a shared CPU"). A part
of that benchmark's run, not a script of its own."""

from __future__ import annotations

import json
from pathlib import Path


def calibrate_cpu_comm(cluster, workdir: str, ranks: int, smoke: bool, reuse: bool):
    """The calibration step: `autotune netbench` on `ranks` gloo ranks of this host (the landscape's world), each
    collective's CPU seconds per rank fitted to the ring alpha-beta; returns (the CPU-time cluster, the fit as JSON).
    Cached in WORKDIR/netbench.json for --reuse."""
    from autotune.fitting.netbench import (
        NetbenchResult,
        cpu_time_cluster,
        fit_result,
        fsdp_cpu_cluster,
        run_netbench,
    )
    from autotune.fitting.netbench_cpu import collective_cpu_cluster

    cache = Path(workdir) / "netbench.json"
    raw = json.loads(cache.read_text()) if reuse and cache.exists() else {}
    # a cache written before netbench timed FSDP2's collectives (plain and tp-sharded) is measured again
    if any(x["link_class"] == "intra_tp2" for x in raw.get("fsdp_samples", [])):
        res = fit_result(raw["world_size"], raw["backend"], raw["samples"], hosts=1, raw_fsdp=raw["fsdp_samples"])
    else:
        sizes = (1 << 12, 1 << 20) if smoke else (1 << 12, 1 << 16, 1 << 20, 1 << 22)
        res: NetbenchResult = run_netbench(ranks, sizes, iters=1 if smoke else 10, warmup=1 if smoke else 2)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(res.to_json()))
    fit, fsdp, fsdp2 = res.cpu_fits["intra"], res.fsdp_cpu_fits.get("intra"), res.fsdp_cpu_fits.get("intra_tp2")
    a2a = collective_cpu_cluster(cluster, res, "all_to_all")
    fsdp_clusters = {tp: fsdp_cpu_cluster(cluster, res, tp) for tp in (1, 2, 4)}  # by target tp: largest measured <= tp
    return (
        cpu_time_cluster(cluster, res),
        {**fsdp_clusters, "all_to_all": a2a},
        {
            "world": res.world_size,
            "alpha_cpu_s": fit.latency_s,
            "beta_cpu_bytes_per_s": fit.bw_bytes_per_s,
            "rel_rms_error": fit.rel_rms_error,
            "samples": fit.num_samples,
            "wall_fit": {"alpha_s": res.fits["intra"].latency_s, "beta_bytes_per_s": res.fits["intra"].bw_bytes_per_s},
            # FSDP2-issued all-gathers / reduce-scatters (netbench_fsdp.py): CPU s per ring step, bytes per CPU s
            "fsdp_alpha_cpu_s": fsdp.latency_s if fsdp else None,
            "fsdp_beta_cpu_bytes_per_s": fsdp.bw_bytes_per_s if fsdp else None,
            "fsdp_rel_rms_error": fsdp.rel_rms_error if fsdp else None,
            "fsdp_samples": fsdp.num_samples if fsdp else 0,
            # the same with tp-sharded DTensor parameters on a 2-rank tp group (2-D FSDP + TP; tp >= 2 targets)
            "fsdp_tp2_alpha_cpu_s": fsdp2.latency_s if fsdp2 else None,
            "fsdp_tp2_beta_cpu_bytes_per_s": fsdp2.bw_bytes_per_s if fsdp2 else None,
            "fsdp_tp2_rel_rms_error": fsdp2.rel_rms_error if fsdp2 else None,
            "fsdp_tp2_samples": fsdp2.num_samples if fsdp2 else 0,
            # the all-to-all alone (the MoE dispatch / combine of a shrunk ep group)
            "all_to_all_alpha_cpu_s": a2a.intra_node_latency_s if a2a else None,
            "all_to_all_beta_cpu_bytes_per_s": a2a.intra_node_bw_bytes_per_s if a2a else None,
        },
    )
