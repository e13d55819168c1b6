"""FP8 training of the transformer blocks' linears (plan.fp8) with torchao's float8 module swap.

As torchtitan 0.2.2 does it (`torchtitan/components/quantization/float8.py` `Float8LinearConverter`): torchao
`convert_to_float8_training` with `Float8LinearConfig.from_recipe_name(recipe)`, before TP and FSDP, converting only
`nn.Linear`s whose dims are multiples of 16 (`torchtitan/components/quantization/utils.py` `module_filter_fn`), and
here always skipping the LM head `output` (torchtitan's documented filter, `filter_fqns = ["output"]`): the head and
the attention core stay in the compute dtype. FSDP2 float8 all-gather is off (`enable_fsdp_float8_all_gather=False`,
the torchao default), so parameters are gathered in the compute dtype as without fp8.

torchao 0.18 `Float8Linear` saves its high-precision input and weight for backward and casts them again there
(`torchao/float8/float8_linear.py` `matmul_with_hp_or_float8_args`): the saved activations are those of a bf16 run.

Never a silent bf16 run: a device whose GEMMs cannot take fp8 operands (CUDA below compute capability 8.9, a build
without `torch._scaled_mm`) or a missing torchao raises a one-line SpecError naming plan.fp8.
"""

from __future__ import annotations

import torch
from torch import nn

from autotune.core.errors import SpecError

MIN_CUDA_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (sm_89) and Hopper (sm_90); torchao float8 README


def _is_block_linear(module: nn.Module, fqn: str) -> bool:
    if not isinstance(module, nn.Linear) or fqn.split(".")[-1] == "output":
        return False
    return module.weight.shape[0] % 16 == 0 and module.weight.shape[1] % 16 == 0


def check_fp8_device(recipe: str, device: torch.device) -> None:
    """Raise a SpecError unless `device` runs torch._scaled_mm (tried on a 16x16 fp8 GEMM)."""
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if tuple(cap) < MIN_CUDA_CAPABILITY:
            raise SpecError(
                f"plan.fp8={recipe} needs FP8 tensor cores (compute capability >= 8.9); "
                f"{torch.cuda.get_device_name(device)} has {cap[0]}.{cap[1]}"
            )
    try:
        a = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        scale_b = one if recipe == "tensorwise" else torch.ones(1, 16, device=device)
        scale_a = one if recipe == "tensorwise" else torch.ones(16, 1, device=device)
        torch._scaled_mm(a, a.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SpecError(
            f"plan.fp8={recipe}: device {device.type} cannot run fp8 GEMMs (torch._scaled_mm: {msg})"
        ) from e


def apply_float8(model: nn.Module, recipe: str) -> None:
    """Swap the block linears of `model` (a meta model: the device is checked by `check_fp8_device`) to Float8Linear.
    TP then shards the Float8Linear weights with the plain DTensor plan (the casts and torch._scaled_mm run on DTensor
    shards, the TP collectives move compute-dtype activations; torchtitan's Float8ColwiseParallel would gather fp8)."""
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as e:
        raise SpecError(f"plan.fp8={recipe} needs torchao (pip install --no-deps 'torchao>=0.10')") from e
    convert_to_float8_training(
        model, config=Float8LinearConfig.from_recipe_name(recipe), module_filter_fn=_is_block_linear
    )
