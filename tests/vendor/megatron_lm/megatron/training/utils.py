# Copyright (c) 2025, NVIDIA CORPORATION. All rights reserved.
# SHIM, not the upstream file: the four helpers megatron/training/arguments.py imports from Megatron-LM core_v0.16.1
# megatron/training/utils.py (lines 394-450 and 762-763 of commit 55ac7082517c3878ae653c07c09c534b8aed49f6), copied
# with torch.distributed's rank lookup reduced to RANK from the environment; the rest of that module (data loaders,
# checkpoint helpers) is not needed by the parser and pulls in the whole trainer.
import os
import warnings

import torch


def _safe_get_rank():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.getenv("RANK", "0"))


def print_rank_0(message, rank=None):
    """If distributed is initialized or rank is specified, print only on rank 0."""
    if (rank if rank is not None else _safe_get_rank()) == 0:
        print(message, flush=True)


def warn_rank_0(message, rank=None):
    """If distributed is initialized or rank is specified, warn only on rank 0."""
    if (rank if rank is not None else _safe_get_rank()) == 0:
        warnings.warn(message)


def is_rank0():
    return _safe_get_rank() == 0


def get_device_arch_version():
    """Returns GPU arch version (8: Ampere, 9: Hopper, 10: Blackwell, ...). SHIM: no GPU in CI, so the arch of the
    GPU the exported file targets comes from MEGATRON_SHIM_DEVICE_ARCH (default 9, Hopper) unless CUDA is present."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.device("cuda:0")).major
    return int(os.getenv("MEGATRON_SHIM_DEVICE_ARCH", "9"))


def update_use_dist_ckpt(args):
    args.use_dist_ckpt = args.ckpt_format != "torch"
