"""netbench: the α-β fit recovers known links (hand-checkable), and real gloo runs at world 2 and 4 on 127.0.0.1 write
a preset the config tree loads."""

import json
import shutil

import pytest

from autotune.cli.main import main
from autotune.core.errors import AutotuneError
from autotune.fitting.netbench import (
    Sample,
    bus_factor,
    cpu_time_cluster,
    fit_alpha_beta,
    fit_result,
    fsdp_cpu_cluster,
    ring_steps,
)
from autotune.spec.config import SEARCH_SPACES, load_config


def _cpu_samples(ops, groups, sizes, alpha, beta) -> list[dict]:
    """Raw rank samples whose CPU seconds follow the ring alpha-beta exactly (ring_steps * alpha + bus bytes / beta),
    in op, group, size order."""
    return [
        dict(
            collective=op,
            link_class="intra",
            group_size=g,
            size_bytes=n,
            time_s=1e-3,
            cpu_time_s=ring_steps(op, g) * alpha + bus_factor(op, g) * n / beta,
        )
        for op in ops
        for g in groups
        for n in sizes
    ]


def test_bus_factors_match_nccl_tests():
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather/reduce-scatter (n-1)/n.
    assert bus_factor("all_reduce", 4) == 1.5 and bus_factor("all_gather", 4) == 0.75
    assert bus_factor("reduce_scatter", 2) == 0.5 and bus_factor("p2p", 8) == 1.0
    assert (ring_steps("all_reduce", 4), ring_steps("all_gather", 8), ring_steps("p2p", 2)) == (6, 7, 1)
    with pytest.raises(ValueError, match="collective='bcast'"):
        bus_factor("bcast", 2)


def test_fit_recovers_known_alpha_beta():
    # alpha = 50 us per hop, beta = 2 GB/s: a 4-rank ring all-reduce of 1 MiB takes 2*(4-1) = 6 hops and moves
    # 1.5 MiB per link -> 6 * 50e-6 + 1.5 * 2**20 / 2e9 = 1.0864 ms.
    alpha, beta = 50e-6, 2e9
    samples = [
        Sample(op, "intra", g, n, ring_steps(op, g) * alpha + bus_factor(op, g) * n / beta)
        for op in ("all_reduce", "all_gather", "p2p")
        for g in (2, 4)
        for n in (4096, 1 << 20, 1 << 22)
    ]
    assert [s.time_s for s in samples if s.collective == "all_reduce" and s.group_size == 4][1] == pytest.approx(
        1.0864e-3, rel=1e-4
    )
    fit = fit_alpha_beta(samples, "intra")
    assert fit.latency_s == pytest.approx(alpha, rel=1e-6) and fit.bw_bytes_per_s == pytest.approx(beta, rel=1e-6)
    assert fit.rel_rms_error < 1e-9


def test_cpu_time_fit_and_cluster():
    # the same ring model fitted on each sample's CPU seconds (alpha_cpu = 20 us per hop, beta_cpu = 4 GB/s) while
    # the wall times follow another link (50 us, 2 GB/s): fit_result keeps both, and cpu_time_cluster prices with the
    # CPU pair, nothing hidden. A 4-rank all-reduce of 1 MiB: 6 * 20e-6 + 1.5 * 2**20 / 4e9 = 0.5132 ms of CPU.
    raw = [
        dict(
            collective=op,
            link_class="intra",
            group_size=g,
            size_bytes=n,
            time_s=ring_steps(op, g) * 50e-6 + bus_factor(op, g) * n / 2e9,
            cpu_time_s=ring_steps(op, g) * 20e-6 + bus_factor(op, g) * n / 4e9,
        )
        for op in ("all_reduce", "reduce_scatter", "p2p")
        for g in (2, 4)
        for n in (4096, 1 << 20, 1 << 22)
    ]
    assert raw[4]["cpu_time_s"] == pytest.approx(0.5132e-3, rel=1e-3)
    res = fit_result(4, "gloo", raw, hosts=1)
    assert res.fits["intra"].latency_s == pytest.approx(50e-6, rel=1e-6)
    cpu = res.cpu_fits["intra"]
    assert cpu.latency_s == pytest.approx(20e-6, rel=1e-6) and cpu.bw_bytes_per_s == pytest.approx(4e9, rel=1e-6)
    cl = cpu_time_cluster(load_config(["cluster=cpu"]).cluster, res)
    assert (cl.intra_node_latency_s, cl.inter_node_bw_bytes_per_s) == pytest.approx((20e-6, 4e9), rel=1e-6)
    assert (cl.comm_efficiency, cl.dp_overlap) == (1.0, 0.0)
    # samples without CPU times (older rank files) fit wall time only and refuse a CPU cluster by name
    old = fit_result(4, "gloo", [{k: v for k, v in r.items() if k != "cpu_time_s"} for r in raw], hosts=1)
    assert old.cpu_fits == {}
    with pytest.raises(AutotuneError, match="no CPU-time samples"):
        cpu_time_cluster(cl, old)


def test_fsdp_issued_collectives_get_their_own_cpu_fit():
    # FSDP2-issued all-gathers / reduce-scatters at 200 us of CPU per ring step and 0.85 GB/s (their own pair, the
    # order a 2-rank loopback run of netbench_fsdp measured) next to bare collectives at 20 us and 4 GB/s: a 4-rank
    # reduce-scatter of 2 MiB (fp32 gradients of a block) costs 3 * 200e-6 + 0.75 * 2**21 / 0.85e9 = 2.450 ms of CPU
    def raw(ops, alpha, beta):
        return _cpu_samples(ops, (2, 4), (4096, 1 << 21), alpha, beta)

    fsdp = raw(("all_gather", "reduce_scatter"), 200e-6, 0.85e9)
    assert fsdp[7]["cpu_time_s"] == pytest.approx(2.450e-3, rel=1e-3)
    res = fit_result(4, "gloo", raw(("all_reduce", "all_gather"), 20e-6, 4e9), hosts=1, raw_fsdp=fsdp)
    fit = res.fsdp_cpu_fits["intra"]
    assert (fit.latency_s, fit.bw_bytes_per_s) == pytest.approx((200e-6, 0.85e9), rel=1e-6)
    assert res.cpu_fits["intra"].latency_s == pytest.approx(20e-6, rel=1e-6)  # the bare pair is unchanged
    cl = fsdp_cpu_cluster(load_config(["cluster=cpu"]).cluster, res)
    assert (cl.intra_node_latency_s, cl.intra_node_bw_bytes_per_s, cl.dp_overlap) == pytest.approx((200e-6, 0.85e9, 0))
    # tp-sharded units (link class intra_tp2) get their own fit, chosen for targets with tp >= 2
    tp2 = [{**x, "link_class": "intra_tp2", "cpu_time_s": 2 * x["cpu_time_s"]} for x in fsdp]
    both = fit_result(4, "gloo", raw(("all_reduce",), 20e-6, 4e9), hosts=1, raw_fsdp=fsdp + tp2)
    assert both.fsdp_cpu_fits["intra_tp2"].latency_s == pytest.approx(400e-6, rel=1e-6)
    lat = [fsdp_cpu_cluster(cl, both, tp).intra_node_latency_s for tp in (1, 2, 4)]
    assert lat == pytest.approx([200e-6, 400e-6, 400e-6], rel=1e-6)
    assert fsdp_cpu_cluster(cl, res, 4).intra_node_latency_s == pytest.approx(200e-6)  # no tp fit: the plain one
    assert fit_result(4, "gloo", raw(("all_reduce",), 20e-6, 4e9), hosts=1).fsdp_cpu_fits == {}  # older rank files
    assert fsdp_cpu_cluster(cl, fit_result(4, "gloo", raw(("all_reduce",), 20e-6, 4e9), hosts=1)) is None
    # a preset stores the three CPU fits (netbench_cpu.py store_cpu_fits) and a sweep's scale-down rows price with
    # them (preset_cpu_clusters): the same links as the clusters built from the netbench result
    from autotune.fitting.netbench_cpu import preset_cpu_clusters, store_cpu_fits

    stored = store_cpu_fits(load_config(["cluster=cpu"]).cluster, both)
    assert (stored.cpu_comm_latency_s, stored.fsdp_cpu_latency_s, stored.fsdp_tp_cpu_latency_s) == pytest.approx(
        (20e-6, 200e-6, 400e-6), rel=1e-6
    )
    bare, tp2 = preset_cpu_clusters(stored, 2)
    assert bare.intra_node_bw_bytes_per_s == pytest.approx(cpu_time_cluster(cl, both).intra_node_bw_bytes_per_s)
    assert tp2.intra_node_latency_s == pytest.approx(fsdp_cpu_cluster(cl, both, 2).intra_node_latency_s)


def test_one_collectives_own_cpu_fit_on_its_widest_group():
    # the all-to-all alone (a shrunk expert-parallel group's dispatch / combine, compose.py ep_cluster): 150 us of
    # CPU per ring step and 3 GB/s on 4 ranks, next to all-reduces at 20 us and 4 GB/s; its 2-rank samples (a
    # different cost: fewer runnable processes) are left out, as cpu_fits does (netbench.py fit_result)
    from autotune.fitting.netbench_cpu import collective_cpu_cluster

    def raw(op, g, alpha, beta):
        return _cpu_samples((op,), (g,), (4096, 1 << 20, 1 << 22), alpha, beta)

    samples = raw("all_to_all", 4, 150e-6, 3e9) + raw("all_to_all", 2, 10e-6, 9e9) + raw("all_reduce", 4, 20e-6, 4e9)
    res = fit_result(4, "gloo", samples, hosts=1)
    cl = collective_cpu_cluster(load_config(["cluster=cpu"]).cluster, res, "all_to_all")
    assert (cl.intra_node_latency_s, cl.intra_node_bw_bytes_per_s) == pytest.approx((150e-6, 3e9), rel=1e-6)
    assert cl.dp_overlap == 0.0 and collective_cpu_cluster(cl, res, "p2p") is None


def test_fit_keeps_latency_non_negative():
    # pure bandwidth data with a tiny negative bias would give alpha < 0 unbounded; the bound holds it at 0.
    samples = [Sample("p2p", "intra", 2, n, n / 1e9 - 1e-7) for n in (1 << 16, 1 << 20, 1 << 22)]
    fit = fit_alpha_beta(samples, "intra")
    assert fit.latency_s == 0.0 and fit.bw_bytes_per_s == pytest.approx(1e9, rel=0.01)


@pytest.mark.parametrize("world", [2, 4])
def test_real_gloo_netbench_writes_a_loadable_preset(tmp_path, world, capsys):
    tree = tmp_path / "search_spaces"
    shutil.copytree(SEARCH_SPACES, tree)
    out = tree / "cluster" / "cpu-measured.yaml"
    # 7 timed iterations averaged per size: with 3, the other xdist worker's load once left the small-message times noisy enough
    # that the bounded fit put the latency at 0 (one CI run in five)
    assert main(["netbench", "--gpus", str(world), "-o", str(out), "--iters", "7", "--json"]) == 0
    printed = capsys.readouterr().out
    assert '"backend": "gloo"' in printed and "only the intra-node link class is measurable" in printed
    # every collective's CPU seconds per rank are recorded and fitted too (gloo's threads and loopback syscalls)
    cpu_fit = json.loads(printed)["cpu_fits"]["intra"]
    assert cpu_fit["num_samples"] > 0 and 1e6 < cpu_fit["bw_bytes_per_s"] < 1e13
    # and FSDP2's own all-gathers / reduce-scatters on a fully_shard-ed unit (netbench_fsdp.py), one sample per
    # (collective, group size, size) on every group size that divides the world, fitted in CPU seconds per call
    doc = json.loads(printed)
    fsdp = doc["fsdp_samples"]
    # plain parameters on groups of 2 and 4; tp-sharded DTensor parameters (2-D FSDP + TP) on 2 x tp 2 at world 4
    assert {(s["link_class"], s["collective"], s["group_size"]) for s in fsdp} == {
        (link, op, g)
        for op in ("all_gather", "reduce_scatter")
        for link, g, tp in (("intra", 2, 1), ("intra", 4, 1), ("intra_tp2", 2, 2))
        if g * tp <= world
    }
    assert all(s["cpu_time_s"] > 0 and s["time_s"] > 0 for s in fsdp)
    assert sum(f["num_samples"] for f in doc["fsdp_cpu_fits"].values()) == len(fsdp)
    cluster = load_config(["cluster=cpu-measured"], config_dir=tree).cluster
    base = load_config(["cluster=cpu"]).cluster
    # loopback gloo: latency between 1 us and 100 ms, bandwidth between 10 MB/s and 1 TB/s (orders of magnitude only)
    assert 1e-6 < cluster.intra_node_latency_s < 0.1 and 1e7 < cluster.intra_node_bw_bytes_per_s < 1e12
    assert cluster.intra_node_bw_bytes_per_s != base.intra_node_bw_bytes_per_s
    assert cluster.inter_node_bw_bytes_per_s == base.inter_node_bw_bytes_per_s  # not measurable on one host
    assert out.read_text().startswith("# Measured by `autotune netbench --backend local --gpus")
    # the CPU-time fits are stored in the preset for scale-down rows (ClusterSpec CPU_COMM_FIELDS)
    assert cpu_fit["latency_s"] == 0 or cluster.cpu_comm_latency_s == pytest.approx(cpu_fit["latency_s"])
    assert cluster.fsdp_cpu_bw_bytes_per_s > 0


def test_netbench_bad_flags_are_one_line_errors(capsys):
    assert main(["netbench", "--gpus", "1"]) == 2
    assert "--gpus=1 must be >= 2" in capsys.readouterr().err
    assert main(["netbench", "--gpus", "2", "--sizes", "4096"]) == 2
    assert "--sizes='4096' must list >= 2 distinct sizes" in capsys.readouterr().err


def test_link_groups_follow_the_hosts():
    from autotune.fitting.netbench_rank import link_groups

    # one host, 4 ranks: intra groups of 2 and 4, no inter-node group
    assert link_groups(["a"] * 4) == [("intra", (0, 1)), ("intra", (0, 1, 2, 3))]
    # 2 hosts x 4 ranks (torchrun/srun block order): intra among rank 0's host, inter = one rank per host
    assert link_groups(["a"] * 4 + ["b"] * 4) == [("intra", (0, 1)), ("intra", (0, 1, 2, 3)), ("inter", (0, 4))]
    # 3 hosts with interleaved ranks (Ray may place bundles so): membership, not rank order, decides
    hosts = ["a", "b", "c", "a", "b", "c"]
    assert link_groups(hosts) == [("intra", (0, 3)), ("inter", (0, 1)), ("inter", (0, 1, 2))]
    # an NVLink domain of two hosts (as GB200 NVL72 trays; 2 ranks per host for brevity): a and b are intra, c is the
    # next domain, reached over the inter-node fabric
    two = ["a", "a", "b", "b", "c", "c"]
    assert link_groups(two, hosts_per_domain=2) == [("intra", (0, 1)), ("intra", (0, 1, 2, 3)), ("inter", (0, 4))]
