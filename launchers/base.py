"""The launcher contract. Every backend passes tests/contract/test_launcher_contract.py."""
from __future__ import annotations

import abc
import threading
import importlib
from typing import Any

from autotune.errors import UsageError
from autotune.types import TrialSpec


class TrialHandle(abc.ABC):
    """A submitted trial. `result()` always returns one schema-complete row (autotune.schema): a trial that crashed,
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
    name: str = "base"

    @abc.abstractmethod
    def submit(self, spec: TrialSpec) -> TrialHandle: ...

    def max_world_size(self) -> int | None:
        """The most ranks one trial can get here (None = no known limit)."""
        return None

    def close(self) -> None:
        """Release whatever the launcher holds (connections, placement groups)."""


_REGISTRY = {
    "local": "launchers.local:LocalLauncher",
    "simulate": "launchers.simulate:SimulateLauncher",
    "slurm": "launchers.slurm:SlurmLauncher",
    "ray": "launchers.ray_launcher:RayLauncher",
}


def get_launcher(name: str, **options: Any) -> Launcher:
    if name not in _REGISTRY:
        raise UsageError(f"--backend={name!r} must be one of {', '.join(_REGISTRY)}")
    module, _, cls = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**options)
