"""Which override key families each command acts on (issue 28 item 3: no silently ignored input).

Every command takes Hydra overrides, but not every command reads every family: `plan` searches a space and has no
single layout, `estimate` estimates one layout and has no space. A key a command would not read is refused in one line
(field, value, rule) instead of being dropped; `plan.*` in a command that searches pins that dimension
(`plan.tp=2` -> `space.tp=[2]`), which is what a user typing it means.

    family          plan  sweep/submit  estimate/probe-memory  bench
    model.* model=   yes   yes           yes                    yes
    train.* cluster  yes   yes           yes                    yes
    space.<dim>      yes   yes           refused (use plan.*)   refused (use plan.*)
    space.<switch>   yes   yes           yes (the rules, usable memory) yes
    plan.<dim>       pins  pins          yes                    yes
    plan.<derived>   refused refused     yes                    yes
    sweep.*          refused yes         refused                yes (warm-up, timed steps, timeout)

`calibrate` reads model, train and cluster keys only, `netbench` cluster and sweep keys only (ONLY_READS).
"""

from __future__ import annotations

from autotune.core.errors import UsageError

SEARCHING = frozenset({"plan", "sweep", "submit"})
ONE_LAYOUT = frozenset({"estimate", "probe-memory", "bench"})
READS_SWEEP = frozenset({"sweep", "submit", "bench", "netbench"})
# the commands that read only some families: calibrate refits the cluster of a sweep's model and train shape; netbench
# times collectives on the cluster through the sweep's launcher settings
ONLY_READS = {"calibrate": ("model", "train", "cluster", "experiment"), "netbench": ("cluster", "sweep", "experiment")}


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.lstrip("+~").partition("=")
    return key.strip(), value.strip()


def check_overrides(command: str, overrides: list[str] | tuple[str, ...]) -> list[str]:
    """The overrides `command` acts on: unchanged, or with `plan.<dim>=v` rewritten to `space.<dim>=[v]` for the
    commands that search. Raises UsageError (one line) for a key the command would ignore."""
    from autotune.core.types import PLAN_FIELDS
    from autotune.spec.config import SPACE_FIELDS

    out = []
    for ov in overrides:
        key, value = _split(ov)
        family, _, field = key.partition(".")
        if command in ONLY_READS and family not in ONLY_READS[command]:
            raise UsageError(
                f"{key}={value}: `autotune {command}` does not read {family}.* "
                f"(it reads {', '.join(f + '.*' for f in ONLY_READS[command][:-1])} and experiment=)"
            )
        if family == "sweep" and field and command not in READS_SWEEP:
            raise UsageError(
                f"{key}={value} is a sweep setting, which `autotune {command}` does not read "
                f"(it is read by sweep, submit, bench and netbench)"
            )
        if family == "space" and field in SPACE_FIELDS and command in ONE_LAYOUT:
            raise UsageError(
                f"{key}={value} lists search-space values, but `autotune {command}` runs one layout: "
                f"give plan.{field}=<one value> (or use `autotune plan` to search space.{field})"
            )
        if family == "plan" and field and command in SEARCHING:
            if value in ("null", "~", ""):  # the default: derived per layout
                continue
            if field not in PLAN_FIELDS:  # not a plan field at all: the config's own "unknown key" error
                out.append(ov)
                continue
            if field not in SPACE_FIELDS:
                raise UsageError(
                    f"{key}={value} is derived by `autotune {command}` for each layout (from train.global_batch_size "
                    "and the degrees); it cannot be pinned"
                )
            if value.startswith("["):
                raise UsageError(
                    f"{key}={value} must be one value (it pins that dimension); to search several, use "
                    f"space.{field}={value}"
                )
            _check_kind(key, value, field)
            out.append(f"space.{field}=[{value}]")  # pins the dimension: the space holds that one value
            continue
        out.append(ov)
    return out


def _check_kind(key: str, value: str, field: str) -> None:
    """The pinned value's type, named by the key the user typed (the range rules then name space.<field>)."""
    import yaml

    from autotune.core.types import PLAN_KINDS

    try:
        v = yaml.safe_load(value)
    except yaml.YAMLError:
        v = value
    kind = PLAN_KINDS[field]
    ok = {"int": isinstance(v, int) and not isinstance(v, bool), "bool": isinstance(v, bool)}.get(kind, True)
    if not ok:
        what = {"int": "an integer", "bool": "true or false"}[kind]
        raise UsageError(f"{key}={value} must be {what} (it pins space.{field})")


def load_config_for(command: str, overrides: list[str] | tuple[str, ...]):
    """`load_config` of the overrides `command` acts on; an error about a pinned dimension names the plan.* key typed."""
    from autotune.spec.config import ConfigError, load_config

    try:
        return load_config(check_overrides(command, overrides))
    except ConfigError as e:
        for ov in overrides:
            key, value = _split(ov)
            family, _, field = key.partition(".")
            if command in SEARCHING and family == "plan" and str(e).startswith(f"space.{field}="):
                raise ConfigError(f"{key}={value} (pins space.{field}): {e}") from None
        raise
