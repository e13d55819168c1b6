"""Framework profiles (`train.framework`): memory accounting and feasibility per training framework.

See autotune/predict/frameworks/base.py for the hooks and docs/frameworks.md for what each profile assumes and where that
comes from in the framework's source.
"""

from __future__ import annotations

from autotune.core.errors import SpecError
from autotune.core.types import FRAMEWORKS
from autotune.predict.frameworks.base import FrameworkProfile
from autotune.predict.frameworks.bench_model import BenchModelProfile
from autotune.predict.frameworks.deepspeed import DeepSpeedProfile
from autotune.predict.frameworks.megatron import MegatronProfile
from autotune.predict.frameworks.nanotron import NanotronProfile
from autotune.predict.frameworks.torchtitan import TorchtitanProfile

PROFILES: dict[str, FrameworkProfile] = {
    p.name: p
    for p in (BenchModelProfile(), TorchtitanProfile(), MegatronProfile(), NanotronProfile(), DeepSpeedProfile())
}
if tuple(PROFILES) != FRAMEWORKS:  # the names TrainSpec accepts (autotune.core.types) are the profiles here
    raise ImportError(f"framework profiles {tuple(PROFILES)} differ from core.types.FRAMEWORKS {FRAMEWORKS}")


def get_profile(name: str) -> FrameworkProfile:
    """The profile named `name`; an unknown name is a SpecError naming the field."""
    if name not in PROFILES:
        raise SpecError(f"train.framework={name!r} must be one of {', '.join(PROFILES)}")
    return PROFILES[name]


__all__ = ["FRAMEWORKS", "PROFILES", "FrameworkProfile", "get_profile"]
