# SHIM (autotune tests, not upstream): only the SamplerType enum, copied verbatim from upstream's
# nanotron/generation/sampler.py @ a27e8fe8; the sampler classes (torch.distributed all-gathers) are left out.
from enum import Enum, auto


class SamplerType(Enum):
    TOP_P = auto()
    TOP_K = auto()
    GREEDY = auto()
    BASIC = auto()
