"""Live sweep progress on the terminal (rich): one line per finished trial with trial i/K, layout, status, throughput,
best so far and ETA; a spinner line for what is in flight when stdout is a terminal."""

from __future__ import annotations

import time
from typing import Any

from autotune.core.labels import layout_label


def layout_text(r: Any) -> str:
    """The layout label (autotune.core.labels.layout_label), kept under this name for the sweep modules."""
    return layout_label(r)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


_STYLE = {
    "ok": "green",
    "simulated": "cyan",
    "oom": "magenta",
    "crash": "red",
    "timeout": "yellow",
    "pruned": "dim",
    "invalid": "red",
}


class SweepProgress:
    """Prints to a rich Console; `metric` is the column ranked on (measured tok/s/GPU, or predicted for simulate)."""

    def __init__(self, console: Any, total: int, parallel: int, done_before: int = 0) -> None:
        self.console = console
        self.total = total
        self.parallel = max(1, parallel)
        self.count = done_before
        self.walls: list[float] = []
        self.best: tuple[float, str] | None = None
        self.t0 = time.monotonic()
        self._live = None
        if console.is_terminal:
            from rich.status import Status

            self._live = Status("starting", console=console)
            self._live.start()

    def seed(self, rows: Any) -> None:
        """Rows finished before a resume: they set the best so far (and the ETA's per-trial time), printing nothing."""
        for row in rows:
            if row.get("wall_s") is not None:
                self.walls.append(float(row["wall_s"]))
            value = row.get("tokens_per_s_per_gpu")
            if value is None and row.get("status") == "simulated":
                value = row.get("pred_tokens_per_s_per_gpu")
            if value is not None and (self.best is None or value > self.best[0]):
                self.best = (float(value), str(row["trial_id"]))

    def running(self, in_flight: list[str]) -> None:
        if self._live is not None:
            self._live.update(
                f"running {', '.join(in_flight) or '-'}  ({self.count}/{self.total} done, "
                f"elapsed {fmt_duration(time.monotonic() - self.t0)})"
            )

    def eta_s(self) -> float | None:
        left = max(0, self.total - self.count)
        if not self.walls:
            return None
        return sum(self.walls) / len(self.walls) * left / self.parallel

    def finished(self, row: dict[str, Any]) -> None:
        from rich.markup import escape

        self.count += 1
        if row.get("wall_s") is not None:
            self.walls.append(float(row["wall_s"]))
        status = str(row["status"])
        value = row.get("tokens_per_s_per_gpu")
        label = "tok/s/GPU"
        if value is None and status == "simulated":
            value, label = row.get("pred_tokens_per_s_per_gpu"), "pred tok/s/GPU"
        if value is not None and (self.best is None or value > self.best[0]):
            self.best = (float(value), str(row["trial_id"]))
        perf = f"{value:,.1f} {label}" if value is not None else escape(str(row.get("error_type") or "-"))
        best = f"{self.best[0]:,.1f} ({self.best[1]})" if self.best else "-"
        style = _STYLE.get(status, "")
        self.console.print(
            f"trial {self.count}/{self.total}  {row['trial_id']}  {layout_text(row)}  "
            f"[{style}]{status}[/{style}]  {perf}  wall {fmt_duration(row.get('wall_s'))}  "
            f"best {best}  ETA {fmt_duration(self.eta_s())}",
            highlight=False,
        )

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
