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
without `torch._scaled_mm`), mxfp8 below Blackwell (compute capability 10.0; CPU included) or a missing torchao raises
a one-line SpecError naming plan.fp8; nvfp4 is always refused (`refuse_nvfp4`).
"""

from __future__ import annotations

import torch
from torch import nn

from autotune.core.errors import SpecError

MIN_CUDA_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (sm_89) and Hopper (sm_90); torchao float8 README
MIN_MXFP8_CAPABILITY = (10, 0)  # MX block-scaled tensor cores: Blackwell (sm_100); torchao mx_formats README


def refuse_nvfp4() -> None:
    """bench_model does not train NVFP4: the only NVFP4 training code in reach, torchao 0.18's
    `prototype.moe_training.nvfp4_training`, is a prototype (Triton kernels for sm_100, no stable API), not a
    maintained training recipe. NVFP4 layouts are modelled (plan, estimate) and exported (Megatron-LM --fp4-recipe)."""
    raise SpecError(
        "plan.fp8=nvfp4 is modelled and exported but bench_model does not train it (torchao 0.18 has NVFP4 training "
        "only as a prototype); measure it with Megatron-LM (autotune export --format megatron)"
    )


def _is_block_linear(module: nn.Module, fqn: str) -> bool:
    if not isinstance(module, nn.Linear) or fqn.split(".")[-1] == "output":
        return False
    return module.weight.shape[0] % 16 == 0 and module.weight.shape[1] % 16 == 0


def check_fp8_device(recipe: str, device: torch.device) -> None:
    """Raise a SpecError unless `device` runs the recipe: torch._scaled_mm (tried on a 16x16 fp8 GEMM) for the float8
    recipes; Blackwell tensor cores for mxfp8; nvfp4 never (see `refuse_nvfp4`)."""
    if recipe == "nvfp4":
        refuse_nvfp4()
    if recipe == "mxfp8":
        cap = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        if cap is None or tuple(cap) < MIN_MXFP8_CAPABILITY:
            have = f"compute capability {cap[0]}.{cap[1]}" if cap else f"device {device.type}"
            raise SpecError(
                f"plan.fp8=mxfp8 needs Blackwell MX tensor cores (compute capability >= 10.0); this run has {have}"
            )
        return
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
    if recipe == "nvfp4":
        refuse_nvfp4()
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as e:
        raise SpecError(f"plan.fp8={recipe} needs torchao (pip install --no-deps 'torchao>=0.10')") from e
    if recipe == "mxfp8":  # torchao's MXFP8 training (as torchtitan's quantize.linear.mx converter uses it)
        from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
        from torchao.quantization import quantize_

        config = MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe.MXFP8_RCEIL)
        quantize_(model, config, filter_fn=lambda m, fqn: _is_block_linear(m, fqn))
        return
    convert_to_float8_training(
        model, config=Float8LinearConfig.from_recipe_name(recipe), module_filter_fn=_is_block_linear
    )
