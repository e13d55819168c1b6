"""The root of every user-facing error (the pattern of optuna's `OptunaError`).

A user mistake (a config value, a flag, an input file, a sweep folder) raises a subclass of `AutotuneError`, whose
message names the field, the value and the rule. `autotune.cli.main` turns exactly these into one stderr line and
exit code 2; any other exception is a bug in autotune or a library and keeps its traceback.

`AutotuneError` is a `ValueError`, so callers (and tests) that catch `ValueError` keep working.
"""

from __future__ import annotations


class AutotuneError(ValueError):
    """A user mistake: the CLI prints `autotune: error: <message>` and exits 2."""


class SpecError(AutotuneError):
    """A model, plan, train or cluster value that breaks a rule (raised by the frozen dataclasses in types.py)."""


class UsageError(AutotuneError):
    """A command-line flag, or a combination of flags, that the command cannot act on."""


class InputFileError(AutotuneError):
    """A file the user pointed at (trial file, HF config.json, cluster preset, sweep folder) that cannot be used."""


def require(ok: bool, message: str) -> None:
    """Raise SpecError(message) unless `ok`: the frozen specs' one-line checks."""
    if not ok:
        raise SpecError(message)


def positive_int(name: str, value: object) -> None:
    require(
        isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        f"{name}={value!r} must be an integer >= 1",
    )
