"""Framework profiles (`train.framework`): memory accounting and feasibility per training framework.

See autotune/frameworks/base.py for the hooks and docs/frameworks.md for what each profile assumes and where that
comes from in the framework's source.
"""

from __future__ import annotations

from autotune.errors import SpecError
from autotune.frameworks.base import FrameworkProfile
from autotune.frameworks.deepspeed import DeepSpeedProfile
from autotune.frameworks.megatron import MegatronProfile
from autotune.frameworks.nanotron import NanotronProfile
from autotune.frameworks.torchtitan import TorchtitanProfile

PROFILES: dict[str, FrameworkProfile] = {
    p.name: p
    for p in (FrameworkProfile(), TorchtitanProfile(), MegatronProfile(), NanotronProfile(), DeepSpeedProfile())
}
FRAMEWORKS = tuple(PROFILES)


def get_profile(name: str) -> FrameworkProfile:
    """The profile named `name`; an unknown name is a SpecError naming the field."""
    if name not in PROFILES:
        raise SpecError(f"train.framework={name!r} must be one of {', '.join(PROFILES)}")
    return PROFILES[name]


__all__ = ["FRAMEWORKS", "PROFILES", "FrameworkProfile", "get_profile"]
