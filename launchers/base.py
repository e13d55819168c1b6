"""The launcher contract. Every backend passes tests/contract/test_launcher_contract.py."""

from __future__ import annotations

import abc
import importlib
import threading
from collections.abc import Mapping
from typing import Any

from autotune.core.errors import UsageError
from autotune.core.trial import TrialSpec


class TrialHandle(abc.ABC):
    """A submitted trial. `result()` always returns one schema-complete row (autotune.results.schema): a trial that crashed,
    hung, ran out of memory or was cancelled still yields a row with the matching status, never an exception."""

    spec: TrialSpec

    @abc.abstractmethod
    def done(self) -> bool: ...

    @abc.abstractmethod
    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the trial ends (or `timeout` seconds pass: TimeoutError) and return its row."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop the trial and every process it started; its row then has status `crash` with error_type `Cancelled`."""

    @abc.abstractmethod
    def status(self) -> str:
        """`pending` | `running` | one of the row statuses once done."""


class ThreadedTrialHandle(TrialHandle):
    """The plumbing every process-running handle shares: a watcher sets `_row` and then the `_done` event;
    `result`/`done`/`cancel`/`status` read them. Subclasses ask for a stop in `_request_cancel` and say whether the
    trial has started in `_started`."""

    _done: threading.Event
    _row: dict[str, Any] | None

    @abc.abstractmethod
    def _request_cancel(self) -> None: ...

    def _started(self) -> bool:
        return True

    def _what(self) -> str:
        return f"trial {self.spec.trial_id}"

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self._what()} still running after {timeout} s")
        assert self._row is not None
        return dict(self._row)

    def cancel(self) -> None:
        if not self._done.is_set():
            self._request_cancel()
        self._done.wait()

    def status(self) -> str:
        if self._done.is_set():
            assert self._row is not None
            return str(self._row["status"])
        return "running" if self._started() else "pending"


class Launcher(abc.ABC):
    """`submit` is the one method a backend must write; the others are optional hooks with working defaults (like
    optuna's `BaseSampler.before_trial`), so callers never probe for them."""

    name: str = "base"

    @abc.abstractmethod
    def submit(self, spec: TrialSpec) -> TrialHandle: ...

    def max_world_size(self) -> int | None:
        """The most ranks one trial can get here (None = no known limit)."""
        return None

    def describe_limit(self) -> str:
        """`max_world_size` in words, with the setting that raises it (for the "--gpus exceeds ..." error)."""
        return f"{self.max_world_size()} ranks"

    def close(self) -> None:
        """Release whatever the launcher holds (connections, placement groups)."""


# The one list of backends: CLI choices and error messages derive from it. name -> "module:Class" (imported on use, so
# ray/submitit load only when chosen).
LAUNCHERS: dict[str, str] = {
    "local": "launchers.local:LocalLauncher",
    "slurm": "launchers.slurm:SlurmLauncher",
    "ray": "launchers.ray_launcher:RayLauncher",
    "simulate": "launchers.simulate:SimulateLauncher",
}
SIMULATED = frozenset({"simulate"})  # backends that start no process (models only): nothing to measure there


def launcher_names(*, measuring: bool = False, besides: str | None = None) -> tuple[str, ...]:
    """Registered backends (`measuring`: only those that run real ranks; `besides`: all but that one)."""
    return tuple(n for n in LAUNCHERS if not (measuring and n in SIMULATED) and n != besides)


def get_launcher(name: str, **options: Any) -> Launcher:
    if name not in LAUNCHERS:
        raise UsageError(f"--backend={name!r} must be one of {', '.join(LAUNCHERS)}")
    module, _, cls = LAUNCHERS[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**options)


def launcher_from_config(sweep: Any, backend: str, **options: Any) -> Launcher:
    """The launcher of `backend` (`sweep`: autotune.spec.config.SweepSpec) given the backend's own block when the config
    has one (`sweep.slurm`, `sweep.ray`: a mapping the launcher checks)."""
    block = getattr(sweep, backend, None)  # a backend without a config block has no field of its name
    if isinstance(block, Mapping):
        options[backend] = dict(block)
    return get_launcher(backend, **options)
