"""Where presets may live (issue 28 item 5) and what keys the tree knows (for "did you mean").

`cluster=PATH` / `model=PATH`: a preset YAML outside the tree (e.g. what `autotune calibrate -o` or `netbench -o`
wrote) is composed as the group's preset `_from_path` in an overlay of the config tree (a temporary folder of symlinks
to everything else), so Hydra treats it exactly as a preset and `cluster.*` overrides apply on top of it.
`model=PATH.json` is a Hugging Face config.json: `model=hf model.config_path=PATH` (autotune/spec/hf_import.py).
"""

from __future__ import annotations

from pathlib import Path

from autotune.core.errors import InputFileError

PATH_GROUPS = ("model", "cluster")
PATH_PRESET = "_from_path"


def path_presets(overrides: list[str]) -> tuple[list[str], dict[str, Path]]:
    """(overrides with `group=PATH` replaced by `group=_from_path`, group -> the file)."""
    out, picked = [], {}
    for ov in overrides:
        key, sep, value = ov.partition("=")
        if key in PATH_GROUPS and sep and ("/" in value or value.endswith((".yaml", ".yml", ".json"))):
            path = Path(value).expanduser()
            if not path.is_file():
                raise InputFileError(f"{key}={value!r}: no such file (give a preset name or the path of a YAML file)")
            if key == "model" and path.suffix == ".json":  # a Hugging Face config.json: the `hf` preset reads it
                out += ["model=hf", f"model.config_path={path.resolve()}"]
                continue
            picked[key] = path.resolve()
            out.append(f"{key}={PATH_PRESET}")
        else:
            out.append(ov)
    return out, picked


def overlay(config_dir: Path, picked: dict[str, Path], tmp: Path) -> Path:
    """`tmp` made a copy of the tree in symlinks, with each picked file as its group's `_from_path.yaml`."""
    for entry in config_dir.iterdir():
        if entry.name in picked:
            (tmp / entry.name).mkdir()
            for preset in entry.iterdir():
                (tmp / entry.name / preset.name).symlink_to(preset)
            (tmp / entry.name / f"{PATH_PRESET}.yaml").write_bytes(picked[entry.name].read_bytes())
        else:
            (tmp / entry.name).symlink_to(entry)
    return tmp


def known_keys(config_dir: Path, groups: tuple[str, ...]) -> list[str]:
    """Every `group.key` of the presets in the tree and the root config's mappings (`plan.*`): the "did you mean"
    candidates of an unknown key. Only read on that error path."""
    import yaml

    keys: set[str] = set()
    files: list[tuple[Path, str | None]] = [(config_dir / "config.yaml", None)]
    files += [(f, g) for g in groups if g != "experiment" for f in sorted((config_dir / g).glob("*.yaml"))]
    for path, group in files:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if group is not None:
            keys.update(f"{group}.{k}" for k in doc if isinstance(k, str))
        else:
            keys.update(f"{top}.{k}" for top, sub in doc.items() if isinstance(sub, dict) for k in sub)
    return sorted(keys)
