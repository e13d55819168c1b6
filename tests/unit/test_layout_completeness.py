"""Every ParallelPlan field is wired into every place that must know it (docs/extending.md). Adding a field without
deciding each place fails here, with one line per place to update; nothing else should need to break.

Checked mechanically: the field's `Dim` declaration (autotune/core/types.py: Optuna and OOM-pruning decisions), the search
space defaults (search_spaces/space/default.yaml + config.SpaceSpec), the planner's enumeration, the results schema,
the Optuna distribution, and every exporter's PLAN_KEYS table (mapped or "NOT MAPPED: why"). Not checkable here,
listed in docs/extending.md: constraints, the memory and perf models, and the bench trainer's mesh.
"""

import dataclasses
from dataclasses import replace
from pathlib import Path

import yaml

from autotune.core.types import PLAN_DIMS, PLAN_FIELDS, PLAN_KINDS, ParallelPlan
from autotune.interop import FORMATS, _module
from autotune.layouts.planner import enumerate_arrays, enumerate_candidates
from autotune.results.schema import PLAN_ARROW_TYPES, RESULT_SCHEMA
from autotune.spec.config import SpaceSpec, load_config

ROOT = Path(__file__).resolve().parents[2]
SPACE_YAML = ROOT / "search_spaces" / "space" / "default.yaml"


def _declaration_problems(name: str) -> list[str]:
    f = {x.name: x for x in dataclasses.fields(ParallelPlan)}[name]
    dim, out = PLAN_DIMS[name], []
    if "dim" not in f.metadata:
        out.append(
            "autotune/core/types.py: declare it with dim_field(default, ...) (autotune/core/dims.py) so its Dim metadata exists"
        )
    if PLAN_KINDS[name] not in PLAN_ARROW_TYPES:
        out.append(f"autotune/core/types.py: type {PLAN_KINDS[name]!r} has no column type (int, str or bool)")
    if dim.optuna is None:
        out.append(
            "Optuna distribution (autotune/search/strategies/optuna_strategy.py): set Dim.optuna=True to sample it "
            "as a categorical, False if it is derived"
        )
    if dim.oom is None:
        out.append(
            "OOM-pruning partial order (autotune/search/oom_pruning.py): set Dim.oom to shape / higher / lower / "
            "derived and document why in the module docstring"
        )
    elif dim.oom in ("higher", "lower") and not dim.label:
        out.append("OOM-pruning partial order (autotune/search/oom_pruning.py): an ordered field needs Dim.label")
    if PLAN_KINDS[name] == "str" and not dim.choices:
        out.append(
            "autotune/core/types.py: a string field needs Dim.choices (its codes in autotune/core/plan_arrays.py)"
        )
    return out


def _space_problems(name: str, space_yaml: dict, varied: set[str]) -> list[str]:
    dim, out = PLAN_DIMS[name], []
    if dim.derived:
        return out
    if name not in space_yaml:
        out.append(
            f"search space defaults ({SPACE_YAML.relative_to(ROOT)}): list its values, or set Dim.derived "
            "if the planner computes it"
        )
    if name not in {x.name for x in dataclasses.fields(SpaceSpec)}:
        out.append("search space schema (autotune/spec/config.py SpaceSpec and _space_from): add the field")
    if name not in varied:
        out.append(
            "planner enumeration (autotune/layouts/planner.py enumerate_arrays): enumerate the space's values "
            "(it is held at its default now)"
        )
    return out


def _optuna_problems(name: str) -> list[str]:
    from autotune.search.strategies.optuna_strategy import DIMS

    if PLAN_DIMS[name].optuna and name not in DIMS:
        return ["Optuna distribution (autotune/search/strategies/optuna_strategy.py DIMS): sample it"]
    return []


def _schema_problems(name: str) -> list[str]:
    want = PLAN_ARROW_TYPES.get(PLAN_KINDS[name])
    if name not in RESULT_SCHEMA.names or RESULT_SCHEMA.field(name).type != want:
        return [f"results schema (autotune/results/schema.py RESULT_FIELDS): a {want} column"]
    return []


def _export_problems(name: str) -> list[str]:
    out = []
    for fmt in FORMATS:
        keys = getattr(_module(fmt), "PLAN_KEYS", {})
        if not keys.get(name, "").strip():
            out.append(
                f"export mapping (autotune/interop/plan_keys.py, the {fmt} table): the target key(s), or "
                '"NOT MAPPED: <why>" (and list it in translate()\'s unmapped settings)'
            )
    return out


def test_every_plan_field_is_wired_everywhere():
    space_yaml = yaml.safe_load(SPACE_YAML.read_text())
    # booleans the default space holds at one value (compile) are switched to both, so enumeration is what is tested
    flags = [f for f in PLAN_FIELDS if PLAN_KINDS[f] == "bool" and f in {x.name for x in dataclasses.fields(SpaceSpec)}]
    # likewise string fields the default space holds at one value (offload) are switched to all their choices,
    # and dp_shard (held at [0] = all of dp) to hybrid sizes as well; null (fp8: the cluster's default) counts as held
    held = [f for f in PLAN_FIELDS if PLAN_KINDS[f] == "str" and f in space_yaml and len(space_yaml[f] or ()) <= 1]
    every = [f"space.{f}=[{','.join(PLAN_DIMS[f].choices)}]" for f in held]
    # an MoE model, so the expert-parallel degrees have values to enumerate (ep: its experts' divisors; etp: [1,2]);
    # the switched fields are enumerated in two halves (the whole product of every opt-in choice outgrows memory)
    switched = [
        *(f"space.{f}=[false,true]" for f in flags),
        *every,
        "space.act_offload_layers=[0,2]",
        "space.recompute_layers=[0,2]",
    ]
    varied: set[str] = set()
    for half in (switched[::2], switched[1::2]):
        cfg = load_config(["model=tiny-moe", "space.dp_shard=[0,2]", "space.etp=[1,2]", *half])
        arr = enumerate_arrays(cfg.space, cfg.train, 8)
        varied |= {f for f in PLAN_FIELDS if len(set(arr[f].tolist())) > 1}
    problems = []
    for name in PLAN_FIELDS:
        for where in (
            _declaration_problems(name)
            + _space_problems(name, space_yaml, varied)
            + _optuna_problems(name)
            + _schema_problems(name)
            + _export_problems(name)
        ):
            problems.append(f"ParallelPlan.{name}: {where}")
    assert not problems, "a ParallelPlan field is not wired everywhere (see docs/extending.md):\n" + "\n".join(problems)


def test_export_tables_name_only_plan_fields_and_say_why_when_not_mapped():
    for fmt in FORMATS:
        keys = _module(fmt).PLAN_KEYS
        assert set(keys) <= set(PLAN_FIELDS), (fmt, sorted(set(keys) - set(PLAN_FIELDS)))  # no stale names
        for field, target in keys.items():
            if target.startswith("NOT MAPPED"):
                assert target.startswith("NOT MAPPED: ") and len(target) > len("NOT MAPPED: ") + 10, (fmt, field)


def test_not_mapped_fields_are_listed_by_the_exporter_when_they_matter():
    """A field an exporter declares NOT MAPPED shows up in its unmapped list for some layout that uses it
    (the table agrees with what translate() does)."""
    from autotune.interop import unmapped

    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    job = (cfg.model, cfg.train, cfg.cluster)
    layouts = [
        ParallelPlan(
            dp=4,
            tp=4,
            pp=2,
            cp=2,
            vpp=2,
            zero_stage=1,
            micro_batch_size=2,
            grad_accum_steps=64,
            recompute="selective",
            sequence_parallel=True,
            pp_schedule="interleaved_1f1b",
        ),
        ParallelPlan(dp=2, tp=2, pp=2, micro_batch_size=1, grad_accum_steps=256, recompute="full", pp_schedule="gpipe"),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, compile=True),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, offload="params"),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, dp_shard=4),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, fp8="tensorwise"),
        ParallelPlan(
            dp=4, tp=2, zero_stage=3, micro_batch_size=2, grad_accum_steps=64, sequence_parallel=True, tp_overlap=True
        ),
        ParallelPlan(dp=4, pp=2, micro_batch_size=2, grad_accum_steps=64, pp_split_embedding=True, pp_split_loss=True),
        ParallelPlan(dp=4, pp=2, micro_batch_size=2, grad_accum_steps=64, tp_pp_dp_mapping=True),
        ParallelPlan(dp=8, micro_batch_size=2, grad_accum_steps=32, recompute="selective", mla_recompute=True),
        ParallelPlan(dp=8, micro_batch_size=2, grad_accum_steps=32, recompute="selective", mlp_recompute=True),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, act_offload_layers=4),
        ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, recompute="full", recompute_layers=2),
    ]
    # DeepSpeed refuses tp > 1 (UsageError): its layouts are the same with tp = 1
    no_tp = [replace(p, tp=1, sequence_parallel=False, tp_overlap=False) for p in layouts]
    texts = {fmt: " | ".join(u for p in (no_tp if fmt == "deepspeed" else layouts) for u in unmapped(fmt, *job, p))
             for fmt in FORMATS}  # fmt: skip
    # the expert-parallel degrees on an MoE model (128 experts of width 768: ep 8 and etp 2 divide them)
    moe = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb"])
    ep_plan = ParallelPlan(dp=8, tp=2, ep=8, etp=2, sequence_parallel=True, micro_batch_size=2, grad_accum_steps=32)
    deepep = dataclasses.replace(ep_plan, moe_dispatcher="deepep")
    for fmt in FORMATS:
        rc_plan = dataclasses.replace(ep_plan, recompute="selective", moe_recompute="moe")
        off_plan = dataclasses.replace(ep_plan, moe_offload="expert_fc1+moe_act")
        norm_plan = dataclasses.replace(ep_plan, recompute="selective", norm_recompute=True)
        for plan in (ep_plan, deepep, rc_plan, dataclasses.replace(ep_plan, ep_overlap=True), off_plan, norm_plan):
            p = replace(plan, tp=1, sequence_parallel=False) if fmt == "deepspeed" else plan
            texts[fmt] += " | " + " | ".join(unmapped(fmt, moe.model, moe.train, moe.cluster, p))
    for fmt in FORMATS:
        for field, target in _module(fmt).PLAN_KEYS.items():
            if target.startswith("NOT MAPPED"):
                assert field in texts[fmt], (fmt, field, texts[fmt])


def test_planner_frame_has_every_field_as_a_column():
    df = enumerate_candidates(load_config(["model=tiny"]), 8)
    assert [c for c in df.columns if c in PLAN_FIELDS] == list(PLAN_FIELDS)


EXTENDING = ROOT / "docs" / "extending.md"
CONFIG_YAML = ROOT / "search_spaces" / "config.yaml"


def test_every_plan_field_is_a_known_plan_key_in_config_yaml():
    """`plan.<field>=...` overrides need the key in search_spaces/config.yaml's plan block (Hydra's struct mode)."""
    plan_block = yaml.safe_load(CONFIG_YAML.read_text())["plan"]
    missing = [f for f in PLAN_FIELDS if f not in plan_block]
    assert not missing, f"search_spaces/config.yaml plan: block lacks {missing} (docs/extending.md)"


def _listed_files() -> list[str]:
    """The paths docs/extending.md names under "Files a new searched dimension touches"."""
    import re

    text = EXTENDING.read_text()
    section = text.split("## Files a new searched dimension touches", 1)[1].split("\n## ", 1)[0]
    return re.findall(
        r"`((?:autotune|bench_model|search_spaces|launchers|benchmarks)/[^`*<>{}]+\.(?:py|yaml))`", section
    )


def _names_in(path: Path) -> set[str]:
    """The identifiers a file uses in code (names, attributes, keywords, arguments, whole string constants; YAML keys):
    prose in comments and docstrings does not count."""
    import ast
    import re

    text = path.read_text()
    if path.suffix == ".yaml":
        return set(re.findall(r"^\s*([A-Za-z_]\w*)\s*:", text, re.M))
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, (ast.keyword, ast.arg)) and node.arg:
            out.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
    return out


def test_extending_md_names_every_file_each_searched_dimension_touches():
    """The files every existing searched, several-valued opt-in dimension (offload, dp_shard, fp8 today: Dim.opt_in,
    not a boolean switch) uses in code are the files the next one will touch: each must be in docs/extending.md's
    list, and every listed file must exist. Counted on the code, so a place added for all of them shows up here."""
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.yaml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    sources = [ROOT / f for f in tracked if not f.startswith(("tests/", "notebooks/"))]
    names = {p: _names_in(p) for p in sources}
    dims = [f for f in PLAN_FIELDS if PLAN_DIMS[f].opt_in and PLAN_KINDS[f] != "bool"]
    assert len(dims) >= 3, dims  # offload, dp_shard, fp8
    touched = set.intersection(*({str(p.relative_to(ROOT)) for p in sources if f in names[p]} for f in dims))
    listed = _listed_files()
    assert [p for p in listed if not (ROOT / p).is_file()] == []
    missing = sorted(touched - set(listed))
    assert not missing, f"docs/extending.md does not name {missing}, which {dims} all touch"


def test_every_train_field_is_a_key_of_the_train_config_tree():
    """A TrainSpec field without a key in search_spaces/train/default.yaml cannot be set from the command line
    (`train.<field>=...` is refused as an unknown config key): sdpa_repeat_kv, fp8_casts, fused_grouped_mlp and
    fp8_attention were missing until 2026-11-29."""
    from autotune.core.types import TrainSpec

    keys = set(yaml.safe_load((ROOT / "search_spaces" / "train" / "default.yaml").read_text()))
    missing = [f.name for f in dataclasses.fields(TrainSpec) if f.name not in keys]
    assert not missing, f"add to search_spaces/train/default.yaml (with a comment saying what it does): {missing}"
