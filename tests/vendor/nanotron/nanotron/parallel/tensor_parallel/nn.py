# SHIM (autotune tests, not upstream): upstream's nanotron/parallel/tensor_parallel/nn.py defines the TP linear
# layers (torch.distributed, nanotron's parameter sharding). The config modules import only the enum from it, which
# upstream nn.py itself imports from enum.py (copied unchanged next to this file).
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

__all__ = ["TensorParallelLinearMode"]
