"""Simulate launcher: the performance and memory models only, no process is started.

Each trial yields a row with status `simulated`: layout and `pred_*` columns filled from `autotune.predict.perf.estimate_perf`
and `autotune.predict.memory.estimate_memory`; every measured column (tokens_per_s, mfu, step times, peak memory, losses) stays
null — a model's output is not a measurement. A layout the planner's rules reject (`autotune.layouts.rules.check_plan`)
yields status `invalid` with the reason. This is what lets `autotune sweep --gpus 1024 --backend simulate` run on a laptop.
"""

from __future__ import annotations

import socket
from typing import Any

from autotune.core.trial import TrialSpec, measured_peak_prediction
from autotune.results.schema import normalize_row, row_from_spec
from launchers.base import Launcher, TrialHandle
from launchers.protocol import code_version, utc_now


def simulate_row(spec: TrialSpec, backend: str = "simulate") -> dict[str, Any]:
    from autotune.layouts.rules import check_plan
    from autotune.predict.memory import estimate_memory
    from autotune.predict.perf import estimate_perf

    now = utc_now()
    row = row_from_spec(spec)
    row.update(
        backend=backend, started_at=now, ended_at=now, hostname=socket.gethostname(), code_version=code_version()
    )
    reason = check_plan(spec.plan, spec.model, spec.train, spec.cluster)
    if reason:
        row.update(status="invalid", error_type="InvalidPlan", error_message=reason, reject_reason=reason)
        return normalize_row(row)
    perf = estimate_perf(spec.plan, spec.model, spec.train, spec.cluster)
    mem = estimate_memory(spec.plan, spec.model, spec.train, spec.cluster)
    row.update(
        status="simulated",
        pred_mem_bytes=mem.reserved_peak_bytes,
        pred_peak_mem_reserved_bytes=measured_peak_prediction(
            spec.cluster.device_type, mem.reserved_peak_bytes, mem.allocator_peak_bytes
        ),
        pred_tokens_per_s_per_gpu=perf.tokens_per_s_per_gpu,
        pred_mfu=perf.mfu,
    )
    return normalize_row(row)


class SimulateHandle(TrialHandle):
    """Finished on creation: there is nothing to wait for, time out or cancel."""

    def __init__(self, spec: TrialSpec, row: dict[str, Any]) -> None:
        self.spec = spec
        self._row = row

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        return dict(self._row)

    def cancel(self) -> None:
        """No-op: a simulated trial has already ended when `submit` returns."""

    def status(self) -> str:
        return str(self._row["status"])


class SimulateLauncher(Launcher):
    name = "simulate"

    def __init__(self, **_ignored: Any) -> None:
        """Accepts (and ignores) the options other launchers take (workdir, log_dir, ...), so the controller can
        build every backend the same way."""

    def max_world_size(self) -> None:
        return None

    def submit(self, spec: TrialSpec) -> SimulateHandle:
        return SimulateHandle(spec, simulate_row(spec, self.name))
