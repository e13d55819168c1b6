"""CPU offload (plan.offload): model-state memory on the device and the host against DeepSpeed's published estimator
outputs and hand-computed bench_model bytes, the constraints and the host-memory rejection, the perf terms, OOM-pruning
direction, the label and the exports."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.labels import layout_label
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.interop import render, unmapped
from autotune.layouts.planner import enumerate_candidates
from autotune.layouts.rules import check_plan
from autotune.predict.frameworks.bench_model import model_state_arrays
from autotune.predict.memory import OFFLOAD_CODE, estimate_memory
from autotune.predict.perf import perf_arrays
from autotune.predict.rank_params import rank_params
from autotune.search.oom_pruning import dominance_reason
from autotune.spec.config import load_config

GiB = 2**30
# t5-3b rows of DeepSpeed's estimator docs, copied into the repository (source cited in the file's header)
REFERENCE = Path(__file__).parent / "data" / "deepspeed_offload_estimator_rows.csv"
# DeepSpeed's accounting (ZeRO paper / DeepSpeed docs): bf16 params and grads, fp32 master, fp32 Adam (K = 12)
PAPER = TrainSpec(seq_len=4, global_batch_size=8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
FSDP = TrainSpec(seq_len=4, global_batch_size=8)  # bench_model: fp32 params/grads/Adam, bf16 compute
OPT, PAR = OFFLOAD_CODE["optimizer"], OFFLOAD_CODE["params"]


def _rows() -> list[dict]:
    with REFERENCE.open() as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return [r for r in rows if r["model"] == "t5-3b" and "cold" in r["estimator"]]


def _row(rows, stage: int, options: str) -> dict:
    (row,) = [r for r in rows if r["zero_stage"] == str(stage) and r["options"] == options]
    return row


def _states(psi, stage, shard, offload):
    ms = model_state_arrays(psi, stage, shard, PAPER, offload)
    device = float(ms["params"] + ms["grads"] + ms["optimizer"])
    return device, float(ms["host"])


def test_deepspeed_estimator_rows_with_offload():
    """DeepSpeed docs/code-docs/source/memory.rst ("Memory Requirements"): estimate_zero2/3_model_states_mem_needs_all_cold
    for t5-3b (total_params=2851e6, largest_layer_params=32e6) on 1 node x 8 GPUs, printed in GiB with 2 decimals
    (tests/unit/data/deepspeed_offload_estimator_rows.csv). DeepSpeed's formulas (deepspeed/runtime/zero/stage3.py,
    stage_1_and_2.py estimate_*): GPU adds 4*largest_layer_params in ZeRO-3 (the gathered fp16 layer and its grad; our
    `buffers` term, not a model state); CPU is per node and times additional_buffer_factor=1.5, and with zero_init=0
    (and always in ZeRO-2) it is max(4*gpus_per_node, bytes/param)*Psi: every process first loads the whole fp32 model
    (4 bytes/param), a start-up peak autotune does not model."""
    rows = _rows()
    psi, n, largest, buffer_factor = 2851e6, 8, 32e6, 1.5
    cases = [  # (stage, options, offload code, zero_init)
        (3, "offload_param=cpu, offload_optimizer=cpu, zero_init=1", PAR, True),
        (3, "offload_param=cpu, offload_optimizer=cpu, zero_init=0", PAR, False),
        (3, "offload_param=none, offload_optimizer=cpu, zero_init=1", OPT, True),
        (3, "offload_param=none, offload_optimizer=cpu, zero_init=0", OPT, False),
        (2, "offload_optimizer=cpu", OPT, False),
    ]
    for stage, options, code, zero_init in cases:
        row = _row(rows, stage, options)
        device, host = _states(psi, stage, n, code)
        gpu = device + (4 * largest if stage == 3 else 0.0)
        assert round(gpu / GiB, 2) == pytest.approx(float(row["per_gpu_gb"])), (options, gpu / GiB)
        per_param = host * n / psi  # steady-state host bytes per parameter, whole node
        node = (per_param if zero_init else max(4 * n, per_param)) * psi * buffer_factor
        assert round(node / GiB, 2) == pytest.approx(float(row["per_cpu_gb"])), (options, node / GiB)
    # the steady-state bytes per parameter on the host are DeepSpeed's 16 (optimizer) and 18 (+ fp16 params)
    assert _states(psi, 3, n, OPT)[1] * n / psi == pytest.approx(16.0)
    assert _states(psi, 3, n, PAR)[1] * n / psi == pytest.approx(18.0)
    # the docs' formulas: ZeRO-2 offload GPU = 2*params; ZeRO-3 optimizer offload = 4*largest + 2*params/total_gpus
    assert _states(psi, 2, n, OPT)[0] == pytest.approx(2 * psi)
    assert _states(psi, 3, n, OPT)[0] == pytest.approx(2 * psi / n)
    assert _states(psi, 3, n, PAR)[0] == 0.0


def test_bench_model_accounting_by_hand():
    """bench_model (fp32 params = master, fp32 grads, AdamW 2 x fp32): Psi = 1000 parameters, D = 4.
    optimizer offload keeps the FSDP2 shards on the device and puts an fp32 master, 8 bytes of Adam state and an fp32
    gradient buffer per updated parameter on the host: 250 * 16 = 4000 bytes. params offload (stage 3) moves the
    fp32 param and grad shards (250 * 4 each) and Adam (250 * 8) to the host: 4000 bytes; nothing stays on device."""
    ms = model_state_arrays(1000, 2, 4, FSDP, OPT)
    assert (float(ms["params"]), float(ms["grads"]), float(ms["optimizer"]), float(ms["host"])) == (
        1000.0,
        1000.0,
        0.0,
        4000.0,
    )
    ms = model_state_arrays(1000, 1, 4, FSDP, OPT)  # ZeRO-1: the fp32 slice (1000 B) and Adam (2000 B) move
    assert float(ms["optimizer"]) == 0.0 and float(ms["host"]) == 4000.0 and float(ms["params"]) == 4000.0
    ms = model_state_arrays(1000, 3, 4, FSDP, PAR)
    assert float(ms["params"] + ms["grads"] + ms["optimizer"]) == 0.0 and float(ms["host"]) == 4000.0
    none = model_state_arrays(1000, 3, 4, FSDP, 0)
    assert float(none["host"]) == 0.0 and float(none["optimizer"]) == 2000.0


@pytest.fixture(scope="module")
def h100():
    return load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])


def _plan(offload: str, zero_stage: int = 3) -> ParallelPlan:
    return ParallelPlan(dp=8, zero_stage=zero_stage, micro_batch_size=2, grad_accum_steps=32, offload=offload)


def test_more_offload_less_device_more_host(h100):
    mems = {o: estimate_memory(_plan(o), h100.model, h100.train, h100.cluster) for o in ("none", "optimizer", "params")}
    dev = {o: m.reserved_peak_bytes for o, m in mems.items()}
    assert dev["none"] > dev["optimizer"] > dev["params"]
    assert mems["none"].host_bytes == 0.0 < mems["optimizer"].host_bytes
    assert mems["optimizer"].as_columns()["mem_host_bytes"] == mems["optimizer"].host_bytes


def test_constraints_name_their_rule(h100):
    job = (h100.model, h100.train, h100.cluster)
    assert "offload=optimizer requires zero_stage >= 1" in check_plan(_plan("optimizer", 0), *job)
    assert "offload=params requires zero_stage=3 (zero_stage=2)" in check_plan(_plan("params", 2), *job)
    assert check_plan(_plan("params", 3), *job) is None and check_plan(_plan("optimizer", 1), *job) is None


def test_planner_rejects_by_rule_and_host_memory():
    base = ["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "space.tp=[1]", "space.pp=[1]", "space.cp=[1]"]
    df = enumerate_candidates(load_config([*base, "space.offload=[none,optimizer,params]"]), 8)
    rules = df.groupby(["offload", "zero_stage"])["reject_rule"].first()
    assert rules[("optimizer", 0)] == "offload_optimizer_needs_zero"
    assert rules[("params", 2)] == "offload_params_needs_zero3"
    assert (df.loc[df["offload"] == "none", "mem_host_bytes"] == 0).all()
    assert (df.loc[df["offload"] != "none", "mem_host_bytes"] > 0).all()
    # 4 GiB of host memory per GPU cannot hold 15 GiB of offloaded Llama-3.1-8B states at dp=8
    cfg = load_config([*base, "space.offload=[none,optimizer]", "cluster.host_memory_bytes_per_gpu=4294967296"])
    small = enumerate_candidates(cfg, 8)
    off = small[(small["offload"] == "optimizer") & (small["zero_stage"] >= 1)]
    fit = off[off["fits"]]  # device-fitting layouts: rejected for the host (the others already for the device)
    assert len(fit) and (fit["reject_rule"] == "host_memory").all() and off["rank"].isna().all()
    assert fit["reject_reason"].str.contains("GiB host memory per GPU > 4.0 GiB").all()
    assert small.loc[small["offload"] == "none", "reject_rule"].ne("host_memory").all()


def test_perf_prices_transfers_and_cpu_step(h100):
    """optimizer: per step U = Psi_rank / 8 parameters go D2H as fp32 grads and H2D as fp32 params at
    64 GB/s * comm_efficiency, and the CPU AdamW updates them at cpu_adam_params_per_s; params: no step copies."""
    c = h100.cluster
    arr = arrays_from_plans([_plan("none"), _plan("optimizer"), _plan("params")])
    perf = perf_arrays(arr, h100.model, h100.train, c)
    psi = float(np.max([rank_params(h100.model, 1, 1, 1)[k] for k in ("first", "second", "last")]))
    u = psi / 8
    want = u / c.cpu_adam_params_per_s + 2 * (u * 4) / (c.host_device_bw_bytes_per_s * c.comm_efficiency)
    assert perf["optimizer_s"][1] == pytest.approx(want, rel=1e-9)
    assert perf["optimizer_s"][2] == pytest.approx(u / c.cpu_adam_params_per_s, rel=1e-9)
    assert perf["dp_comm_s"][2] > perf["dp_comm_s"][0] == perf["dp_comm_s"][1]  # per-block H2D / D2H copies
    assert perf["step_s"][0] < perf["step_s"][1]


def test_offload_without_host_fields_is_refused(h100):
    cluster = dataclasses.replace(h100.cluster, host_device_bw_bytes_per_s=None)
    with pytest.raises(SpecError, match=r"plan\.offload=optimizer needs cluster\.host_device_bw_bytes_per_s"):
        perf_arrays(arrays_from_plans([_plan("optimizer")]), h100.model, h100.train, cluster)
    perf_arrays(arrays_from_plans([_plan("none")]), h100.model, h100.train, cluster)  # no offload: not needed


def test_oom_order_and_label():
    oom = {**_plan("optimizer").to_dict()}
    assert dominance_reason(oom, _plan("none").to_dict()) == "offload none < optimizer"
    assert dominance_reason(oom, _plan("params").to_dict()) is None
    assert layout_label(_plan("optimizer")).endswith(" off-opt") and layout_label(_plan("params")).endswith(
        " off-params"
    )
    assert "off" not in layout_label(_plan("none"))


def test_exports(h100):
    job = (h100.model, h100.train, h100.cluster)
    ds = render("deepspeed", *job, _plan("params"))
    assert '"offload_param": {\n      "device": "cpu",\n      "pin_memory": true' in ds and '"offload_optimizer"' in ds
    assert '"offload_param"' not in render("deepspeed", *job, _plan("optimizer", 2))
    assert "enable_cpu_offload = true" in render("torchtitan", *job, _plan("params"))
    assert any("plan.offload=optimizer" in u for u in unmapped("torchtitan", *job, _plan("optimizer", 2)))
    assert "fsdp_offload_params: true" in render("accelerate", *job, _plan("params"))
    acc = render("accelerate", *job, _plan("optimizer", 2))  # FSDP has no optimizer-only offload: DeepSpeed plugin
    assert "distributed_type: DEEPSPEED" in acc and "offload_optimizer_device: cpu" in acc and "zero_stage: 2" in acc
    assert "--optimizer-cpu-offload" in render("megatron", *job, _plan("optimizer", 1))
    assert any("plan.offload=params" in u for u in unmapped("megatron", *job, _plan("params")))
    assert any("plan.offload=optimizer" in u for u in unmapped("nanotron", *job, _plan("optimizer", 1)))


def test_torchtitan_probe_refuses_offload(h100):
    """The probe measures on CPU, where host and device are one pool: an offload layout is refused, not mismeasured."""
    from autotune.validation.torchtitan_probe import probe_torchtitan

    with pytest.raises(SpecError, match=r"plan\.offload=params is not supported by the torchtitan probe"):
        probe_torchtitan(h100.model, _plan("params"), 4096)


def test_estimate_reports_host_memory_and_its_rejection():
    from autotune.layouts.estimate import estimate

    over = [
        "plan.zero_stage=3",
        "plan.recompute=full",
        "plan.offload=params",
        "cluster.host_memory_bytes_per_gpu=68719476736",
    ]
    row = estimate(load_config(["model=llama-3.1-70b", "cluster=h100-sxm-80gb", *over]), 8)
    # 70B at dp=8, offload=params: (4 + 4 + 8) bytes x 70.6e9 / 8 = 131.4 GiB of host memory per GPU > 64 GiB
    assert row["mem_host_bytes"] / GiB == pytest.approx(16 * 70.55e9 / 8 / GiB, rel=1e-3)
    assert row["fits"] and row["reject_rule"] == "host_memory"
    assert row["mem_params_bytes"] == row["mem_compute_copy_bytes"]  # only the gathered root unit stays on device


def test_host_offload_adamw_holds_the_modelled_host_bytes_and_matches_adamw():
    """bench_model's HostOffloadAdamW keeps exactly the memory model's 16 bytes per updated parameter on the host
    (fp32 master 4 + Adam 8 + fp32 gradient buffer 4; model_state_arrays(offload=optimizer)) and steps like
    torch.optim.AdamW. CPU only: host and device are one pool here, so this checks bytes and numerics, not a copy
    across PCIe."""
    import torch

    from bench_model.parallel.offload import HostOffloadAdamW

    torch.manual_seed(0)
    a, b = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    b.load_state_dict(a.state_dict())
    kw = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    host, ref = HostOffloadAdamW(list(a.parameters()), **kw), torch.optim.AdamW(b.parameters(), **kw)
    x = torch.randn(4, 16)
    for _ in range(3):
        for m, opt in ((a, host), (b, ref)):
            m(x).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    n = sum(p.numel() for p in a.parameters())
    modelled = float(model_state_arrays(n, 1, 1, FSDP, OPT)["host"])
    assert host.state_bytes() == modelled == 16 * n
    assert all(m.data_ptr() != p.data_ptr() for m, p in zip(host.masters, a.parameters()))  # a separate copy
