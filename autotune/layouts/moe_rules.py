"""Layout rules of expert parallelism (plan.ep, plan.etp) on mixture-of-experts models, as plain functions over plan
arrays: `moe_rules(arr, model)` returns (rule id, failing mask, message template, columns the message uses) in the
form of `autotune.layouts.rules._rules`, so the rule table can take them as they are; `check_moe_plan` is the scalar
wrapper the trainer calls before it builds anything.

The mesh semantics they protect: Megatron-Core's "parallel folding" (megatron/core/transformer/moe/README.md, "MoE
Parallel Folding"; parallel_state.py `initialize_model_parallel`, expert ranks generated as etp x ep x edp x pp over
the same world): per pipeline stage the W/pp ranks are viewed as (edp, ep, etp), etp innermost, independently of the
attention's (dp, cp, tp). Hence:

- ep_dense_model: ep or etp > 1 needs experts to split (num_experts > 0);
- ep_divides_experts: each ep rank holds num_experts/ep whole experts (Megatron arguments.py: "num_experts must be
  divisible by expert_model_parallel_size");
- etp_divides_moe_ffn: each etp rank holds moe_ffn_hidden_size/etp columns of every local expert;
- moe_fold: ep*etp must divide the ranks of a stage, W/pp = dp*cp*tp (Megatron: world divisible by etp*ep*pp);
- moe_needs_sp: with tp > 1 and ep*etp > 1 the MoE layer's tokens must differ across the tp ranks, i.e. the residual
  stream is sequence-sharded (Megatron arguments.py: "When using expert parallelism and tensor parallelism, sequence
  parallelism must be used"); without SP every tp rank would dispatch the same tokens again.
"""

from __future__ import annotations

import numpy as np

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan


def moe_rules(arr: dict[str, np.ndarray], model: ModelSpec) -> list:
    """(rule id, failing mask, message template, message columns), checked in this order."""
    ep, etp, tp, sp = arr["ep"], arr["etp"], arr["tp"], arr["sequence_parallel"]
    stage = arr["dp"] * arr["cp"] * tp  # ranks of one pipeline stage
    e, f = model.num_experts, model.moe_ffn_hidden_size
    split = ep * etp > 1
    return [
        (
            "ep_dense_model",
            split & (e == 0),
            lambda ep, etp: f"ep={ep}, etp={etp} need a mixture-of-experts model (model.num_experts=0)",
            ("ep", "etp"),
        ),
        (
            "ep_divides_experts",
            (e > 0) & (e % ep != 0),
            lambda ep: f"ep={ep} does not divide num_experts={e}",
            ("ep",),
        ),
        (
            "etp_divides_moe_ffn",
            (e > 0) & (f % etp != 0),
            lambda etp: f"etp={etp} does not divide moe_ffn_hidden_size={f}",
            ("etp",),
        ),
        (
            "moe_fold",
            stage % (ep * etp) != 0,
            lambda ep, etp, dp, cp, tp: (
                f"ep*etp={ep}*{etp}={ep * etp} does not divide the ranks of a pipeline stage "
                f"dp*cp*tp={dp}*{cp}*{tp}={dp * cp * tp} (world must be divisible by etp*ep*pp)"
            ),
            ("ep", "etp", "dp", "cp", "tp"),
        ),
        (
            "moe_needs_sp",
            split & (tp > 1) & ~sp,
            lambda ep, etp, tp: (
                f"ep={ep}, etp={etp} with tp={tp} require sequence_parallel=true (the MoE layer needs distinct "
                "tokens on every tp rank, as Megatron-LM requires)"
            ),
            ("ep", "etp", "tp"),
        ),
    ]


def check_moe_plan(plan: ParallelPlan, model: ModelSpec) -> None:
    """Raise SpecError with the first MoE rule `plan` breaks (the trainer's own check; the planner uses the table)."""
    arr = arrays_from_plans([plan])
    for rule, mask, message, columns in moe_rules(arr, model):
        if bool(np.asarray(mask).reshape(-1)[0]):
            values = {c: getattr(plan, c) for c in columns}
            raise SpecError(f"plan: {message(**values)} [{rule}]")
