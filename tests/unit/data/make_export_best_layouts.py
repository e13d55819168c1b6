"""Regenerate export_best_layouts.json: each preset model's best layout (the planner's rank 1) for 64, 256 and
1,024 GPUs under the framework profile of each export format whose own parser the tests run
(tests/unit/test_interop_presets.py). Planning all of them takes minutes, so the test reads this file and re-plans one
entry to catch a stale file.

    PYTHONPATH=. .venv/bin/python tests/unit/data/make_export_best_layouts.py [PROFILE ...]

With profile names, only those profiles' entries are re-planned and the other entries are kept from the file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from autotune.layouts.planner import NoValidLayoutError, enumerate_candidates, top_candidates  # noqa: E402
from autotune.spec.config import load_config  # noqa: E402

OUT = Path(__file__).with_name("export_best_layouts.json")
GPUS = (64, 256, 1024)
# format -> the profile its trainer follows (autotune.analyse.target.profile_for_format; accelerate: train.framework)
PROFILES = {
    "megatron": "megatron",
    "torchtitan": "torchtitan",
    "deepspeed": "deepspeed",
    "accelerate": "bench_model",
    "nanotron": "nanotron",
}
# the cluster each preset is planned on: H100 for the models published on it, H200 for the 671B-1T MLA MoEs
CLUSTER = {"deepseek-v3": "h200-141gb", "kimi-k2": "h200-141gb"}


def preset_models() -> list[str]:
    return sorted(p.stem for p in (ROOT / "search_spaces" / "model").glob("*.yaml") if p.stem != "hf")


def entry(model: str, gpus: int, profile: str) -> dict:
    overrides = [f"model={model}", f"cluster={CLUSTER.get(model, 'h100-sxm-80gb')}", f"train.framework={profile}"]
    cfg = load_config(overrides)
    df = enumerate_candidates(cfg, gpus)
    try:
        top = top_candidates(df, cfg, gpus, 1)
    except NoValidLayoutError as e:
        return {"overrides": overrides, "gpus": gpus, "plan": None, "why": str(e)}
    from autotune.core.types import PLAN_FIELDS

    row = top.iloc[0]
    plan = {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in PLAN_FIELDS}
    return {"overrides": overrides, "gpus": gpus, "plan": plan, "candidate_id": row["candidate_id"]}


def main(only: list[str]) -> None:
    out = json.loads(OUT.read_text())["entries"] if only and OUT.exists() else {}
    for model in preset_models():
        for gpus in GPUS:
            for profile in sorted(set(PROFILES.values()) & set(only or PROFILES.values())):
                out[f"{model}@{gpus}/{profile}"] = entry(model, gpus, profile)
                print(model, gpus, profile, out[f"{model}@{gpus}/{profile}"].get("plan") is not None, flush=True)
    OUT.write_text(
        json.dumps({"profiles": PROFILES, "entries": dict(sorted(out.items()))}, indent=1, sort_keys=True) + "\n"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
