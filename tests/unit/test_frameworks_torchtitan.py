"""The torchtitan profile (autotune/predict/frameworks/torchtitan.py) against torchtitan 0.2.2's own Llama 3 model and
`parallelize_llama`, measured on rank 0 of a fake process group under FakeTensorMode + FSDPMemTracker
(autotune/validation/torchtitan_probe.py), layout by layout: the allocated peak autotune.predict.memory predicts with
train.framework=torchtitan is within 5% of the probed peak (+ AdamW's analytical state, which neither side tracks in
fake mode). torchtitan is installed by `make`; without it these tests fail (no skip)."""

from __future__ import annotations

import time

import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.rules import rejections
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

# Llama-3-shaped, reduced: V/h = 32 and f/h = 3.5 as in Llama 3.1 8B, GQA 2:1; seq 512, world 8 for every layout
MODEL = ModelSpec(
    name="llama3-tt", num_layers=2, hidden_size=256, ffn_hidden_size=896, num_heads=16, num_kv_heads=8, vocab_size=8192
)
SEQ = 512
# wide blocks, small vocabulary, short sequence: FSDP2's per-block backward buffers, not the loss, set the peak
WIDE = ModelSpec(
    name="wide-tt", num_layers=3, hidden_size=1024, ffn_hidden_size=3584, num_heads=16, num_kv_heads=8, vocab_size=2048
)
WIDE_SEQ = 128
P = ParallelPlan
LAYOUTS = {  # (plan, train.precision); dp = FSDP degree, zero 3 = reshard "always", zero 2 = "never"
    "fsdp8 none z3 mbs1": (P(dp=8, zero_stage=3, recompute="none"), "bf16"),
    "fsdp8 selective z3 mbs2": (P(dp=8, zero_stage=3, micro_batch_size=2, recompute="selective"), "bf16"),
    "fsdp8 full z3 mbs2": (P(dp=8, zero_stage=3, micro_batch_size=2, recompute="full"), "bf16"),
    "fsdp8 none z2 mbs2": (P(dp=8, zero_stage=2, micro_batch_size=2, recompute="none"), "bf16"),
    "tp8+sp none (fp32: no FSDP)": (P(tp=8, sequence_parallel=True, recompute="none"), "fp32"),
    "fsdp4 x tp2+sp selective z3 mbs2": (
        P(dp=4, tp=2, sequence_parallel=True, zero_stage=3, micro_batch_size=2, recompute="selective"),
        "bf16",
    ),
    "fsdp2 x tp4+sp full z3": (P(dp=2, tp=4, sequence_parallel=True, zero_stage=3, recompute="full"), "bf16"),
    "fsdp4 x tp2+sp none z2": (P(dp=4, tp=2, sequence_parallel=True, zero_stage=2, recompute="none"), "bf16"),
    "fsdp2 x tp4+sp selective z2 mbs2": (
        P(dp=2, tp=4, sequence_parallel=True, zero_stage=2, micro_batch_size=2, recompute="selective"),
        "bf16",
    ),
}
WIDE_LAYOUTS = {
    "wide: fsdp8 full z3 (block backward)": (P(dp=8, zero_stage=3, recompute="full"), "bf16"),
    "wide: fsdp4 x tp2+sp selective z3 (block backward)": (
        P(dp=4, tp=2, sequence_parallel=True, zero_stage=3, recompute="selective"),
        "bf16",
    ),
}


def _predicted(plan: ParallelPlan, precision: str, framework: str, model=MODEL, seq=SEQ) -> float:
    cfg = load_config(
        [
            "model=tiny",
            "cluster=cpu",
            f"train.precision={precision}",
            f"train.seq_len={seq}",
            f"train.global_batch_size={plan.dp * plan.micro_batch_size}",
            f"train.framework={framework}",
        ]
    )
    arr = arrays_from_plans([plan])
    assert rejections(arr, model, cfg.train, cfg.cluster)[0][0] is None  # a layout torchtitan runs
    return float(memory_arrays(arr, model, cfg.train, cfg.cluster)["allocated"][0])


@pytest.mark.timeout(600)
def test_torchtitan_profile_within_5pct_of_torchtitan_on_11_layouts():
    from autotune.validation.torchtitan_probe import probe_torchtitan

    rows, t0 = [], time.perf_counter()
    cases = [(n, p, x, MODEL, SEQ) for n, (p, x) in LAYOUTS.items()]
    cases += [(n, p, x, WIDE, WIDE_SEQ) for n, (p, x) in WIDE_LAYOUTS.items()]
    for name, plan, precision, model, seq in cases:
        probe = probe_torchtitan(model, plan, seq, precision)
        measured = probe["peak_bytes"] + probe["optimizer_bytes"]
        # sanity: torchtitan really ran the model (its loss alone holds >= 8 bytes per local logit)
        assert measured > 8 * plan.micro_batch_size * seq * model.vocab_size / plan.tp
        predicted = [_predicted(plan, precision, fw, model, seq) for fw in ("torchtitan", "bench_model")]
        rows.append((name, measured, *predicted))
    table = "\n".join(
        f"{n:52s} probe {m / 2**20:8.2f} MiB  torchtitan profile {p / 2**20:8.2f} ({p / m - 1:+.2%})  "
        f"bench_model {b / 2**20:8.2f} ({b / m - 1:+.1%})"
        for n, m, p, b in rows
    )
    table += f"\n({time.perf_counter() - t0:.1f} s)"
    assert len(rows) >= 8
    assert all(abs(p / m - 1) <= 0.05 for _, m, p, _ in rows), table


@pytest.mark.parametrize(
    ("override", "plan", "fragment"),
    [
        ([], P(dp=4, tp=2, recompute="none"), "apply_tp always shards the sequence"),
        ([], P(dp=8, zero_stage=1), "FSDP2 has no optimizer-only sharding"),
        ([], P(dp=4, tp=2, sequence_parallel=True, zero_stage=0), "DDP has not supported > 1D parallelism"),
        ([], P(tp=8, sequence_parallel=True), "maybe_enable_amp disables mixed precision"),
        (["train.seq_len=514"], P(dp=2, tp=2, sequence_parallel=True, zero_stage=3), "ParallelDims.seq_len_divisor"),
    ],
)
def test_torchtitan_rules_name_the_framework(override, plan, fragment):
    base = ["model=tiny", "cluster=cpu", "train.seq_len=512", f"train.global_batch_size={plan.dp}", *override]
    cfg = load_config([*base, "train.framework=torchtitan"])
    model = MODEL
    rule, reason = rejections(arrays_from_plans([plan]), model, cfg.train, cfg.cluster)
    assert rule[0] is not None and rule[0].startswith("torchtitan_"), (rule[0], reason[0])
    assert reason[0].startswith("torchtitan: ") and fragment in reason[0], reason[0]
    # bench_model runs the same layout (the rule is torchtitan's)
    bm = load_config(base)
    assert not str(rejections(arrays_from_plans([plan]), model, bm.train, bm.cluster)[0][0]).startswith("torchtitan")


def test_compiled_loss_keeps_the_compute_dtype_logits_only():
    """torchtitan compiles its loss with the model (components/loss.py @ 6fc499f6 `torch.compile(loss_fn)` when
    training.compile): Inductor saves the bf16 logits themselves plus per-token fp32 statistics and writes the bf16
    gradient, no fp32 logits (measured on CPU with saved_tensors_hooks and the generated code; docs/frameworks.md).
    The torchao B200 row r010 (Llama-3.1-8B, FSDP 8, seq 8192, local batch 1, compile): hand 8192 x 128256 logits x
    (2 + 2) bytes = 4,202,692,608 (eager: x 12)."""
    base = [
        "model=llama-3.1-8b", "cluster=b200", "train.framework=torchtitan", "train.seq_len=8192",
        "train.global_batch_size=8", "plan.dp=8", "plan.zero_stage=3", "plan.micro_batch_size=1",
    ]  # fmt: skip
    out = {}
    for compiled in (False, True):
        cfg = load_config([*base, f"plan.compile={str(compiled).lower()}"])
        mem = memory_arrays(arrays_from_plans([cfg.plan(8)]), cfg.model, cfg.train, cfg.cluster)
        out[compiled] = {k: float(mem[k][0]) for k in ("logits", "allocated", "allocator_reserved")}
    assert out[True]["logits"] == 8192 * 128256 * 4
    assert out[False]["logits"] == 8192 * 128256 * 12
    # the caching-allocator model keeps its fp32 logits block under compile too (FrameworkProfile.
    # compiled_loss_has_fp32_block: the published compiled runs' reserved peaks side with it; docs/frameworks.md)
    assert out[True]["allocator_reserved"] > out[True]["allocated"]
    assert out[False]["allocator_reserved"] > out[False]["allocated"]
