"""Scale-down trials (autotune/run/scaledown.py, autotune/predict/compose.py): the replica a layout runs as, and the
composed step with hand-computed schedule numbers. The real sweep is tests/sweeps/test_sweep_scale_down.py."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.layouts.rules import check_plan
from autotune.predict.compose import Ends, compose_step
from autotune.predict.schedule import bubble_microbatches
from autotune.results.trialfile import make_spec
from autotune.run.scaledown import compose_row, measured_tp_comm_s, replica_spec
from autotune.spec.config import load_config


@pytest.fixture(scope="module")
def tiny():
    return load_config(["experiment=demo"])  # tiny: 8 layers, global batch 16 x 128 tokens, cluster cpu


def _spec(cfg, world, **plan):
    return make_spec(cfg, dataclasses.replace(cfg.plan(world), **plan), trial_id="t1")


def test_bubble_microbatches_is_narayanan_eq1():
    # Narayanan et al. 2021 Eq. 1: bubble = (p-1)/m of the ideal m stage times; Sec 2.2.2: interleaving with v chunks
    # divides it by v. In units of one micro-batch's stage time: p=4 -> 3, p=4 v=2 -> 1.5, p=1 -> 0.
    assert bubble_microbatches(4, 1) == 3.0 and bubble_microbatches(4, 2) == 1.5 and bubble_microbatches(1, 1) == 0.0


def test_replica_keeps_per_rank_shapes_and_shrinks_replication(tiny):
    # dp2 tp2 pp2 (8 ranks), m = 16 / (2*1) = 8: one stage of 8/2 = 4 layers, tp kept whole (2 <= 2 GPUs), dp -> 1
    # (ZeRO then shards nothing: stage 0), micro-batches capped at 4, global batch 1*1*4 sequences
    sd = replica_spec(_spec(tiny, 8, dp=2, tp=2, pp=2, zero_stage=3, grad_accum_steps=8, sequence_parallel=True), 2)
    r = sd.replica
    assert (r.plan.dp, r.plan.tp, r.plan.pp, r.plan.zero_stage, r.plan.grad_accum_steps) == (1, 2, 1, 0, 4)
    assert (r.model.num_layers, r.train.global_batch_size, r.plan.sequence_parallel) == (4, 4, True)
    assert r.trial_id == sd.target.trial_id and check_plan(r.plan, r.model, r.train, r.cluster, None) is None
    # tp=4 does not fit 2 GPUs: its largest power-of-two part that does (2), and no sequence parallelism at tp 1
    assert replica_spec(_spec(tiny, 8, dp=2, tp=4, grad_accum_steps=8), 2).replica.plan.tp == 2
    # dp8 on 2 GPUs: 2 data-parallel ranks (the trainer's FSDP2 wrapper then runs), ZeRO kept, global batch 2*1*2
    z3 = replica_spec(_spec(tiny, 8, dp=8, tp=1, zero_stage=3, grad_accum_steps=2), 2).replica
    assert (z3.plan.dp, z3.plan.zero_stage, z3.train.global_batch_size, z3.plan.world_size) == (2, 3, 4, 2)
    # pp=4 vpp=2 over 8 layers: 8 stages of 1 layer, a rank holds 2 of them
    assert replica_spec(_spec(tiny, 8, dp=2, pp=4, vpp=2, grad_accum_steps=8), 2).replica.model.num_layers == 2


def test_replica_of_moe_ep4_on_one_gpu_prices_the_all_to_all():
    cfg = load_config(["model=tiny-moe"])  # 8 experts, global batch 8 sequences
    target = _spec(cfg, 4, dp=4, ep=4, grad_accum_steps=2)
    sd = replica_spec(target, 1)
    # the one rank holds the target rank's own 8 / 4 = 2 experts (its local part of the ep group), not all 8
    assert (sd.replica.plan.world_size, sd.replica.plan.ep, sd.replica.model.num_experts) == (1, 1, 2)
    r = sd.replica
    c = compose_step(1.0, (target.plan, target.model, target.train), (r.plan, r.model, r.train), target.cluster)
    assert "ep" in c.modelled_parts and "ep" not in c.measured_parts  # the missing peers' all-to-all is priced


def test_a_shrunk_ep_group_keeps_the_target_ranks_experts_and_rows_per_expert():
    # DeepSeek-V3 (256 experts, top-8, 8 groups, top-4 groups) at EP 64: a target rank holds 256 / 64 = 4 experts.
    # On 8 GPUs the replica's ep 8 holds 8 x 4 = 32 (4 per rank); under even routing each expert's grouped GEMM
    # gets T k ep / E rows: target T 8 64 / 256 = 2T, replica T 8 8 / 32 = 2T. The 8 groups of 4 still offer
    # 4 x 4 = 16 >= 8 experts: kept. On 1 GPU: 4 experts, top-k capped at 4 (a token picks distinct experts),
    # 8 groups > 4 experts: plain top-k.
    cfg = load_config(["model=deepseek-v3"])
    m = cfg.model
    target = make_spec(cfg, dataclasses.replace(cfg.plan(512), dp=64, tp=1, pp=8, ep=64), trial_id="t1")
    r8 = replica_spec(target, 8).replica.model
    assert (r8.num_experts, r8.moe_router_topk, r8.moe_router_num_groups, r8.moe_router_group_topk) == (32, 8, 8, 4)
    rows = lambda mod, ep: 1.0 * mod.moe_router_topk * ep / mod.num_experts  # noqa: E731  (per token)
    assert rows(r8, 8) == rows(m, 64) == 2.0
    r1 = replica_spec(target, 1).replica.model
    assert (r1.num_experts, r1.moe_router_topk, r1.moe_router_num_groups, r1.moe_router_group_topk) == (4, 4, 0, 0)


def test_identity_replica_composes_the_measured_step(tiny):
    # a target that is its own replica (dp = pp = 1, tp fits, m <= 4): the composition must return the measurement
    t = _spec(tiny, 2, dp=1, tp=2, micro_batch_size=4, grad_accum_steps=4)
    r = replica_spec(t, 2).replica
    assert r.plan == t.plan and r.model == t.model
    c = compose_step(0.8125, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster)
    assert c.step_s == pytest.approx(0.8125, rel=1e-12) and c.modelled_parts == ()
    assert set(c.measured_parts) == {"compute", "optimizer", "tp"}
    # dp2 ZeRO-2 on 2 GPUs is its own replica too: its data-parallel traffic is then measured, not priced again
    t = _spec(tiny, 2, dp=2, zero_stage=2, micro_batch_size=2, grad_accum_steps=4)
    r = replica_spec(t, 2).replica
    assert r.plan == t.plan
    c = compose_step(0.8125, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster)
    assert c.step_s == pytest.approx(0.8125, rel=1e-12) and c.modelled_parts == () and "dp" in c.measured_parts
    # and with every part the replica times apart (optimizer, dp collectives, host dispatch): still the measurement
    c = compose_step(0.8125, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster, 0.1, 0.2, 0.05)
    assert c.step_s == pytest.approx(0.8125, rel=1e-12) and c.modelled_parts == () and "host" in c.measured_parts
    t = _spec(tiny, 2, dp=1, tp=2, micro_batch_size=4, grad_accum_steps=4)  # tp 2: its collectives' CPU apart too
    r = replica_spec(t, 2).replica
    c = compose_step(0.8125, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster, 0.1, None, 0.05, 0.3)
    assert c.step_s == pytest.approx(0.8125, rel=1e-12) and c.modelled_parts == () and "tp" in c.measured_parts
    ends = Ends(embed_s=0.02, head_s=0.12, comm_thread_s=0.04, host_s=0.01)  # the model's ends apart as well
    args = (0.8125, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster, 0.1, None, 0.05, 0.3)
    c = compose_step(*args, ends=ends)
    assert c.step_s == pytest.approx(0.8125, rel=1e-12) and "ends" in c.measured_parts


def test_measured_optimizer_step_is_not_scaled_with_the_micro_batches(tiny):
    # dp1 tp2, m = 8 from a replica of m = 4: 0.8 CPU-s measured, 0.2 of them in the optimizer step. The compute part
    # (0.6) scales by k = 0.6 / (R.step - R.optimizer) onto the target's terms; the optimizer by the model's own ratio
    # F.optimizer / R.optimizer (= 1 here: same parameters, nothing sharded), so it is counted once, not doubled with
    # the micro-batch count as a single k = 0.8 / R.step would do
    from autotune.predict.compose import _terms

    t = _spec(tiny, 2, dp=1, tp=2, micro_batch_size=1, grad_accum_steps=16)
    r = replica_spec(t, 2).replica
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    R, F = _terms(*rpl, t.cluster), _terms(*tgt, t.cluster)
    c = compose_step(0.8, tgt, rpl, t.cluster, 0.2)
    k = 0.6 / (R["step_s"] - R["optimizer_s"])
    assert F["optimizer_s"] == pytest.approx(R["optimizer_s"]) and c.optimizer_s == pytest.approx(0.2)
    assert c.measured_scale == pytest.approx(k)
    assert c.step_s == pytest.approx(k * (F["step_s"] - F["optimizer_s"]) + 0.2)
    # its own replica (m = 4): still exactly the measurement
    t = _spec(tiny, 2, dp=1, tp=2, micro_batch_size=4, grad_accum_steps=4)
    r = replica_spec(t, 2).replica
    assert compose_step(0.8, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster, 0.2).step_s == (
        pytest.approx(0.8, rel=1e-12)
    )


def test_pipeline_composition_counts_m_plus_p_minus_1_slots(tiny):
    # Free links (no latency, unbounded bandwidth, no per-micro-batch overhead) leave compute, bubble and optimizer:
    # a 1F1B step of p = 4 stages and m = 16 micro-batches takes m + p - 1 = 19 stage slots (Narayanan et al. 2021
    # Sec 2.2.1), interleaved with v = 2: m + (p-1)/v = 17.5 slots (Sec 2.2.2).
    free = dict(intra_node_latency_s=0.0, inter_node_latency_s=0.0, pp_microbatch_overhead_s=0.0)
    free.update(intra_node_bw_bytes_per_s=1e30, inter_node_bw_bytes_per_s=1e30)
    cfg = dataclasses.replace(tiny, cluster=dataclasses.replace(tiny.cluster, **free))
    for vpp, slots in ((1, 19.0), (2, 17.5)):
        t = _spec(cfg, 4, dp=1, pp=4, vpp=vpp, grad_accum_steps=16)
        r = replica_spec(t, 2).replica
        c = compose_step(2.0, (t.plan, t.model, t.train), (r.plan, r.model, r.train), t.cluster)
        assert c.dp_comm_s == 0.0 and c.pp_comm_s == pytest.approx(0.0, abs=1e-20)
        assert (c.step_s - c.optimizer_s) / c.stage_microbatch_s == pytest.approx(slots, rel=1e-12)
        assert (
            c.modelled_parts == ("bubble", "pp")
            and c.measured_parts == ("compute", "optimizer")
            and c.bubble_s == pytest.approx(3 / vpp * c.stage_microbatch_s)
        )


def test_composed_row_charges_the_replica_and_marks_what_was_measured(tiny):
    t = _spec(tiny, 8, dp=2, tp=2, pp=2, grad_accum_steps=8)
    sd = replica_spec(t, 2)
    replica_row = dict(
        status="ok", step_time_mean_s=0.9, step_cpu_time_mean_s=0.5, timed_steps=3, wall_s=20.0, gpu_seconds=40.0
    )
    replica_row["optimizer_cpu_time_mean_s"] = 0.1  # of the 0.5 CPU-s, in the optimizer step
    row = compose_row(sd, replica_row)
    rpl = (sd.replica.plan, sd.replica.model, sd.replica.train)
    c = compose_step(0.5, (t.plan, t.model, t.train), rpl, t.cluster, 0.1)
    assert c.step_s != pytest.approx(compose_step(0.5, (t.plan, t.model, t.train), rpl, t.cluster).step_s)
    # on CPU ranks the replica's step is its busiest rank's CPU seconds (0.5), not its wall seconds (0.9)
    assert row["replica_step_time_s"] == 0.5 and row["step_time_mean_s"] == pytest.approx(c.step_s)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(16 * 128 / c.step_s / 8)
    assert (row["num_gpus"], row["dp"], row["pp"], row["replica_num_gpus"], row["replica_num_layers"]) == (
        8,
        2,
        2,
        2,
        4,
    )
    assert row["scaled_from"] == t.candidate_id == row["candidate_id"]
    assert row["gpu_seconds"] == 40.0  # the budget charges what ran
    # a full-size trial: 8 GPUs x (the replica's wall + (1 warm-up (experiment=demo) + 3 timed) steps x the extra
    # seconds of the composed step over the replica's)
    assert t.warmup_steps == 1 and row["full_size_gpu_seconds"] == pytest.approx(8 * (20.0 + 4 * (c.step_s - 0.5)))
    assert row["measured_parts"] == "compute,optimizer,tp" and row["modelled_parts"] == "bubble,dp,pp"
    assert row["peak_mem_reserved_bytes"] is None  # the replica's memory is not the target's
    oom = dict(status="oom", error_type="OutOfMemoryError", wall_s=5.0, gpu_seconds=10.0)
    row = compose_row(sd, oom)  # zero 0 target: the replica holds its per-rank shapes, fewer layers: the target's OOM
    assert row["status"] == "oom" and row["tokens_per_s_per_gpu"] is None and row["gpu_seconds"] == 10.0
    # a ZeRO-3 dp8 target's replica (2 dp ranks) holds 4x its sharded states: its OOM is not the target's
    z3 = compose_row(replica_spec(_spec(tiny, 8, dp=8, zero_stage=3, grad_accum_steps=2), 2), oom)
    assert (
        z3["status"] == "crash" and z3["error_type"] == "ReplicaOutOfMemory" and "zero_stage=3" in z3["error_message"]
    )


def test_result_files_without_scale_down_columns_still_load(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autotune.results.schema import RESULT_SCHEMA, SCALE_DOWN_FIELDS, empty_row
    from autotune.results.store import read_results

    old = [n for n in RESULT_SCHEMA.names if n not in {f for f, _ in SCALE_DOWN_FIELDS} | {"step_cpu_time_mean_s"}]
    row = {**empty_row(), "trial_id": "t0", "candidate_id": "c0", "status": "ok", "tokens_per_s_per_gpu": 1.5}
    (tmp_path / "trials").mkdir()
    pq.write_table(
        pa.Table.from_pylist([{k: row[k] for k in old}], schema=pa.schema([RESULT_SCHEMA.field(n) for n in old])),
        tmp_path / "trials" / "t0.parquet",
    )
    df = read_results(tmp_path)
    assert len(df) == 1 and df.loc[0, "tokens_per_s_per_gpu"] == 1.5 and df["scaled_from"].isna().all()


def test_bad_scale_down_input_is_one_line(tiny, capsys):
    from autotune.cli.main import main
    from autotune.core.errors import SpecError

    assert main(["bench", "--nproc", "8", "--scale-down", "experiment=demo", "plan.dp=8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--scale-down and --available-gpus=N go together" in err
    with pytest.raises(SpecError, match=r"plan.cp=4 exceeds --available-gpus=2"):
        replica_spec(_spec(tiny, 8, dp=2, cp=4, grad_accum_steps=8), 2)


def test_report_cost_line_charges_replicas_and_states_the_full_size_cost():
    import pandas as pd

    from autotune.search.budget import scale_down_cost_lines

    rows = pd.DataFrame(
        {
            "status": ["ok", "oom", "pruned", "ok"],
            "scaled_from": ["a", "b", None, None],
            "replica_num_gpus": [2, 1, None, None],
            "gpu_seconds": [40.0, 60.0, 0.0, 999.0],
            "full_size_gpu_seconds": [3600.0, 7200.0, None, None],
        }
    )
    # charged: (40 + 60) s = 0.0278 GPU-h; full size: (3600 + 7200) s = 3 GPU-h, 108x; the full-size row is not counted
    (line,) = scale_down_cost_lines(rows)
    assert line == (
        "scale-down: 2 trials on 1/2 GPU(s) charged 0.0278 GPU-hours; "
        "the same layouts at full size would have cost ~3 GPU-hours (108.0x)"
    )
    assert scale_down_cost_lines(rows.drop(columns="scaled_from")) == []


def test_replica_data_parallel_collectives_timed_apart_reach_the_target_by_the_model_ratio(tiny):
    # dp2 pp4 ZeRO-3, m = 8: the replica (dp2 pp1, 4 micro-batches) reduce-scatters every micro-batch, the pipelined
    # target once per step (perf.py fsdp_pipeline_held). With T_d (the replica's FSDP2 collectives, CPU-s) measured
    # apart, k = (T_r - T_o - T_d) / (R.step - R.optimizer - R.dp_comm) and the target's dp traffic is
    # T_d * F.dp_comm / R.dp_comm: the measured per-collective cost, the model's count, ring steps and bytes.
    from autotune.predict.compose import _terms

    t = _spec(tiny, 8, dp=2, pp=4, zero_stage=3, grad_accum_steps=8)
    r = replica_spec(t, 2).replica
    assert (r.plan.dp, r.plan.zero_stage, r.plan.grad_accum_steps) == (2, 3, 4)
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    full, rep = _terms(*tgt, t.cluster), _terms(*rpl, t.cluster)
    assert full["dp_comm_s"] < rep["dp_comm_s"]  # once per step against once per micro-batch
    c = compose_step(0.5, tgt, rpl, t.cluster, 0.05, 0.15)
    k = (0.5 - 0.05 - 0.15) / (rep["step_s"] - rep["optimizer_s"] - rep["dp_comm_s"])
    assert c.measured_scale == pytest.approx(k, rel=1e-12)
    assert c.dp_comm_s == pytest.approx(0.15 * full["dp_comm_s"] / rep["dp_comm_s"], rel=1e-12)
    assert c.optimizer_s == pytest.approx(0.05 * full["optimizer_s"] / rep["optimizer_s"])
    assert "dp" in c.measured_parts
    # without T_d the replica's dp work is inside k and scaled with it
    old = compose_step(0.5, tgt, rpl, t.cluster, 0.05)
    assert old.dp_comm_s == pytest.approx(old.measured_scale * full["dp_comm_s"]) and old.step_s > c.step_s
    # the composed row reads the column from the replica's row (CPU ranks) and keeps it
    rrow = dict(status="ok", step_cpu_time_mean_s=0.5, optimizer_cpu_time_mean_s=0.05, dp_comm_cpu_time_mean_s=0.15)
    row = compose_row(replica_spec(t, 2), {**rrow, "timed_steps": 3, "wall_s": 10.0, "gpu_seconds": 20.0})
    assert row["step_time_mean_s"] == pytest.approx(c.step_s) and row["dp_comm_cpu_time_mean_s"] == 0.15


def test_host_dispatch_and_tp_collectives_do_not_scale_with_flops(tiny):
    # dp2 tp4 (8 ranks) from a tp-2 replica: the dispatch seconds H per step (same code, same layers: the same per
    # micro-batch at tp 4) and the tp collectives' CPU C leave k; C reaches the target by the model's tp-comm ratio
    # per micro-batch (ring steps and bytes at tp 4):
    #   k = (T_r - T_o - H - C) / (R.step - R.optimizer - R.tp)
    #   stage_mb = k F.compute/m + H/m_r + (C/m_r) (F.tp/m)/(R.tp/m_r)
    from autotune.predict.compose import _terms

    t = _spec(tiny, 8, dp=2, tp=4, grad_accum_steps=8, sequence_parallel=True)
    sd = replica_spec(t, 2)
    r = sd.replica
    assert (r.plan.tp, r.plan.dp, r.plan.grad_accum_steps) == (2, 1, 4)
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    full, rep = _terms(*tgt, t.cluster), _terms(*rpl, t.cluster)
    c = compose_step(1.0, tgt, rpl, t.cluster, 0.1, None, 0.08, 0.3)
    k = (1.0 - 0.1 - 0.08 - 0.3) / (rep["step_s"] - rep["optimizer_s"] - rep["tp_comm_s"])
    tp_mb = 0.3 / 4 * (full["tp_comm_s"] / 8) / (rep["tp_comm_s"] / 4)
    assert c.measured_scale == pytest.approx(k, rel=1e-12)
    assert c.stage_microbatch_s == pytest.approx(k * full["compute_s"] / 8 + 0.08 / 4 + tp_mb, rel=1e-12)
    assert "host" in c.measured_parts and "tp" in c.modelled_parts  # tp 4 > 2 GPUs: its ring steps are modelled
    # C is the replica's CPU on its collective threads, taken as tp's only when no other collective ran there
    rrow = dict(status="ok", step_cpu_time_mean_s=1.0, optimizer_cpu_time_mean_s=0.1, host_cpu_time_s=0.08)
    rrow.update(comm_thread_cpu_time_mean_s=0.3, timed_steps=3, wall_s=10.0, gpu_seconds=20.0)
    assert measured_tp_comm_s(r, rrow, "cpu") == 0.3 and measured_tp_comm_s(r, rrow, "cuda") is None
    dp2 = replica_spec(_spec(tiny, 8, dp=8, zero_stage=2, grad_accum_steps=2), 2).replica  # FSDP2's collectives too
    assert measured_tp_comm_s(dp2, rrow, "cpu") is None
    row = compose_row(sd, rrow)
    assert row["step_time_mean_s"] == pytest.approx(c.step_s) and row["comm_thread_cpu_time_mean_s"] == 0.3


def test_fsdp_traffic_of_a_replica_without_dp_rank_is_priced_with_fsdp_issued_links(tiny):
    # tp2 dp4 ZeRO-2 from a tp-2 replica (2 ranks: no dp rank, no T_d): the target's FSDP2 traffic is the step
    # model's own ZeRO-2 term (count of all-gathers / reduce-scatters, ring steps, bytes) priced with the links fitted
    # to FSDP2-issued collectives (netbench fsdp_cpu_cluster) instead of the bare-collective cluster; the rest of the
    # composition is unchanged. A ZeRO-0 target or a replica that measured T_d is not affected.
    from autotune.predict.compose import _terms

    cl = tiny.cluster
    fsdp_cl = dataclasses.replace(cl, intra_node_latency_s=200e-6, intra_node_bw_bytes_per_s=0.85e9, dp_overlap=0.0)
    t = _spec(tiny, 8, dp=4, tp=2, zero_stage=2, grad_accum_steps=4, sequence_parallel=True)
    r = replica_spec(t, 2).replica
    assert (r.plan.tp, r.plan.dp, r.plan.zero_stage) == (2, 1, 0)
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    base = compose_step(1.0, tgt, rpl, cl, 0.1, None, 0.08, 0.3)
    c = compose_step(1.0, tgt, rpl, cl, 0.1, None, 0.08, 0.3, fsdp_cluster=fsdp_cl)
    priced = _terms(*tgt, fsdp_cl)["dp_comm_s"]
    assert priced > _terms(*tgt, cl)["dp_comm_s"] > 0
    assert c.dp_comm_s == pytest.approx(priced, rel=1e-12) and base.dp_comm_s == pytest.approx(
        _terms(*tgt, cl)["dp_comm_s"]
    )
    assert c.step_s - base.step_s == pytest.approx(priced - base.dp_comm_s, rel=1e-9) and "dp" in c.modelled_parts
    z0 = _spec(tiny, 8, dp=4, tp=2, zero_stage=0, grad_accum_steps=4, sequence_parallel=True)
    r0 = replica_spec(z0, 2).replica
    args = (1.0, (z0.plan, z0.model, z0.train), (r0.plan, r0.model, r0.train), cl, 0.1)
    assert compose_step(*args, fsdp_cluster=fsdp_cl).step_s == compose_step(*args).step_s


def test_a_pipeline_stage_gets_only_the_heavier_end_the_replica_measured(tiny):
    # dp1 tp2 pp4 from a tp-2 replica of its 2 layers (bench_model/ends_timing.py): the replica holds the embedding E
    # and the head + loss Hd; target rank 0 holds E, rank pp-1 Hd, each with 2 layers (schedule.layers_of_rank), so
    # the busiest stage gets max(E, Hd) per micro-batch, and the ends leave k with the model's own ends term:
    #   k = (T_r - T_o - (H - H_e) - (C - C_e) - E - Hd) / (R.step - R.optimizer - R.tp - R.ends)
    #   stage_mb = k (F.compute - F.ends)/m + (H - H_e)/m_r + tp part + Hd/Ttot (H_e + C_e + rest) / m_r   (tp whole)
    from autotune.predict.compose import _terms

    t = _spec(tiny, 8, dp=1, tp=2, pp=4, grad_accum_steps=16, sequence_parallel=True)
    r = replica_spec(t, 2).replica
    assert (r.plan.tp, r.plan.pp, r.model.num_layers, r.plan.grad_accum_steps) == (2, 1, 2, 4)
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    full, rep = _terms(*tgt, t.cluster), _terms(*rpl, t.cluster)
    # per micro-batch the model's busiest stage holds one end, the replica both
    assert 0 < full["ends_compute_s"] / 16 < rep["ends_compute_s"] / 4
    ends = Ends(embed_s=0.01, head_s=0.05, comm_thread_s=0.02, host_s=0.004)
    c = compose_step(0.2, tgt, rpl, t.cluster, 0.02, None, 0.01, 0.08, ends=ends)
    rest = 0.2 - 0.02 - (0.01 - 0.004) - (0.08 - 0.02) - 0.06
    k = rest / (rep["step_s"] - rep["optimizer_s"] - rep["tp_comm_s"] - rep["ends_compute_s"])
    tp_mb = (0.08 - 0.02) / 4 * (full["tp_comm_s"] / 16) / (rep["tp_comm_s"] / 4)
    ends_mb = 0.05 / 0.06 * 0.06 / 4  # tp whole: host, collectives and the rest of the ends carried as measured
    mb = k * (full["compute_s"] - full["ends_compute_s"]) / 16 + (0.01 - 0.004) / 4 + tp_mb + ends_mb
    assert c.measured_scale == pytest.approx(k, rel=1e-12) and c.stage_microbatch_s == pytest.approx(mb, rel=1e-12)
    assert "ends" in c.measured_parts
    # without the ends apart the replica's embedding rides along in k on every micro-batch: a slower stage
    assert compose_step(0.2, tgt, rpl, t.cluster, 0.02, None, 0.01, 0.08).stage_microbatch_s > c.stage_microbatch_s


def test_repeated_replica_runs_average_the_measured_parts():
    # the robust pick (benchmarks/scale_down_accuracy.py confirm_best) composes a finalist from its replica run twice:
    # every CPU-seconds column the composition reads is the mean of the ok runs; identity and status from the first
    from autotune.run.scaledown import mean_replica_row

    a = dict(status="ok", trial_id="a", step_cpu_time_mean_s=0.2, head_cpu_time_mean_s=0.05, host_cpu_time_s=0.01)
    b = dict(status="ok", trial_id="b", step_cpu_time_mean_s=0.3, head_cpu_time_mean_s=0.07, host_cpu_time_s=0.03)
    m = mean_replica_row([a, b])
    assert m["step_cpu_time_mean_s"] == pytest.approx(0.25) and m["head_cpu_time_mean_s"] == pytest.approx(0.06)
    assert m["host_cpu_time_s"] == pytest.approx(0.02) and m["trial_id"] == "a"
    assert mean_replica_row([a, dict(b, status="crash")]) == a  # a failed run does not count


def test_a_sweep_prices_in_cpu_seconds_with_the_fits_a_preset_stores(tiny):
    # autotune netbench stores its CPU-time fits in the preset (ClusterSpec CPU_COMM_FIELDS, netbench_cpu.py
    # store_cpu_fits); a sweep's composed row on CPU ranks then prices what its replica did not run as the benchmark
    # does: bare collectives at cpu_comm_*, FSDP2's at fsdp_tp_cpu_* for a tp >= 2 target (fsdp_cpu_* at tp 1).
    # Values: this host's calibration in docs/scale_down.md (bare 216 us, 4.7 GB/s; FSDP2 tp-sharded 704 us, 0.58 GB/s)
    from autotune.core.errors import SpecError
    from autotune.fitting.netbench_cpu import preset_cpu_clusters

    fits = dict(cpu_comm_latency_s=216e-6, cpu_comm_bw_bytes_per_s=4.7e9, fsdp_cpu_latency_s=477e-6)
    fits.update(fsdp_cpu_bw_bytes_per_s=0.83e9, fsdp_tp_cpu_latency_s=704e-6, fsdp_tp_cpu_bw_bytes_per_s=0.58e9)
    cl = dataclasses.replace(tiny.cluster, **fits)
    bare, fsdp = preset_cpu_clusters(cl, 2)
    assert (bare.intra_node_latency_s, bare.dp_overlap, fsdp.intra_node_latency_s) == (216e-6, 0.0, 704e-6)
    assert preset_cpu_clusters(cl, 1)[1].intra_node_bw_bytes_per_s == 0.83e9
    assert preset_cpu_clusters(tiny.cluster, 2) == (None, None)  # a preset without fits prices as before
    with pytest.raises(SpecError, match="fsdp_cpu_latency_s"):
        dataclasses.replace(cl, fsdp_cpu_latency_s=-1.0)
    t = _spec(tiny, 8, dp=4, tp=2, zero_stage=2, grad_accum_steps=4, sequence_parallel=True)
    t = dataclasses.replace(t, cluster=cl)
    sd = replica_spec(t, 2)
    r = sd.replica
    rrow = dict(status="ok", step_cpu_time_mean_s=1.0, optimizer_cpu_time_mean_s=0.1, host_cpu_time_s=0.08)
    rrow.update(comm_thread_cpu_time_mean_s=0.3, timed_steps=3, wall_s=10.0, gpu_seconds=20.0)
    c = compose_step(
        1.0, (t.plan, t.model, t.train), (r.plan, r.model, r.train), bare, 0.1, None, 0.08, 0.3, fsdp_cluster=fsdp
    )
    assert compose_row(sd, rrow)["step_time_mean_s"] == pytest.approx(c.step_s, rel=1e-12)
    plain = compose_row(replica_spec(dataclasses.replace(t, cluster=tiny.cluster), 2), rrow)["step_time_mean_s"]
    assert plain != pytest.approx(c.step_s, rel=1e-3)


def test_replica_dp_collectives_reach_a_wider_group_per_call_plus_the_extra_ring_steps(tiny):
    # dp8 ZeRO-2 (m = 2) from its dp-2 replica. Links of latency a per ring step and no bandwidth cost: FSDP2 issues per
    # micro-batch one all-gather and one reduce-scatter for each of the 8 blocks and for the root unit (perf_dp.fsdp_s,
    # FrameworkProfile.fsdp_collectives_per_block = 1, 1), so 2 x 18 = 36 collectives per step at both sizes: the
    # target's cost F = 36 x 7a (ring of 8: n-1 = 7 steps), at the replica's 2 ranks F' = R = 36 x 1a. A replica that
    # measured T_d = 36 x 3a (3a per call: 2a of it a per-call cost that no ring step explains) composes to
    # T_d * F'/R + (F - F') = 108a + 216a = 324a (9a per call: its 3a and 6 more ring steps), not T_d * F/R = 756a.
    a = 1e-3
    links = dict(intra_node_latency_s=a, inter_node_latency_s=a)
    links.update(intra_node_bw_bytes_per_s=1e30, inter_node_bw_bytes_per_s=1e30)
    t = _spec(tiny, 8, dp=8, zero_stage=2, micro_batch_size=1, grad_accum_steps=2)
    sd = replica_spec(t, 2)
    r = sd.replica
    assert (r.plan.dp, r.plan.zero_stage, r.plan.grad_accum_steps, r.model.num_layers) == (2, 2, 2, 8)
    cl = dataclasses.replace(t.cluster, comm_efficiency=1.0, dp_overlap=0.0, **links)
    tgt, rpl = (t.plan, t.model, t.train), (r.plan, r.model, r.train)
    c = compose_step(1.0, tgt, rpl, cl, 0.05, 36 * 3 * a)
    assert c.dp_comm_s == pytest.approx(324 * a, rel=1e-9)
    assert "dp" in c.measured_parts
    # a replica holding the target's whole dp group is unchanged: T_d * F/R (here F = R, so T_d itself)
    whole = compose_step(1.0, (r.plan, r.model, r.train), rpl, cl, 0.05, 36 * 3 * a)
    assert whole.dp_comm_s == pytest.approx(36 * 3 * a, rel=1e-9)
    # dp4 pp2 ZeRO-2 (m = 4) from its dp-2 replica (pp 1, 4 layers, m = 4): the pipelined target gathers each of its
    # stage's 4 blocks and its root unit once per step and reduce-scatters them once after the last backward
    # (perf_dp.fsdp_s, pipeline_defers_grad_reduce): 10 collectives, F = 10 x 3a, F' = 10 x 1a; the replica issues
    # 4 x (4 + 1) x 2 = 40, R = 40a. T_d = 40 x 3a composes to 120a x 10/40 + 20a = 50a (5a per call), not 90a.
    t = _spec(tiny, 8, dp=4, pp=2, zero_stage=2, micro_batch_size=1, grad_accum_steps=4)
    r = replica_spec(t, 2).replica
    assert (r.plan.dp, r.plan.pp, r.plan.grad_accum_steps, r.model.num_layers) == (2, 1, 4, 4)
    c = compose_step(1.0, (t.plan, t.model, t.train), (r.plan, r.model, r.train), cl, 0.05, 40 * 3 * a)
    assert c.dp_comm_s == pytest.approx(50 * a, rel=1e-9)
