"""Trial entry point (docs/trial_protocol.md): `python -m bench_model.run --spec SPEC.json --out RESULT.json` on every
rank under torchrun, or `main(argv)` in a process that has the torch.distributed environment (a single process
without it runs as a world of 1 on 127.0.0.1).

Rank 0 writes RESULT.json atomically after a barrier and before any teardown. A failing rank writes
RESULT.json.rank<R>.err.json and exits at once with os._exit (3 = oom, 1 = crash) so torchrun tears down the others.
OOM is recognised by type: torch.OutOfMemoryError (CUDA) and MemoryError (CPU; see `as_memory_error`).
The protocol itself (run_protocol, the err files, exit codes, write_json_atomic) lives in launchers/protocol.py, next
to the launcher half that reads those files; this module is the trainer's body and its test-only faults."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

# The trial protocol (both halves, one owner): launchers/protocol.py
from launchers.protocol import exit_with, run_protocol

# test-only faults (TrialSpec.inject_fault); hang_rank1 hangs the rank that a 2-node job places on its second node
FAULTS = ("", "crash", "crash_rank1", "hang", "hang_rank1", "kill_rank1")


def fault_hook(spec, rank: int):
    def hook() -> None:
        fault = spec.inject_fault
        if fault == "crash" or (fault == "crash_rank1" and rank == 1):
            raise RuntimeError(f"injected fault {fault!r} on rank {rank}")
        if (fault == "hang" and rank == 0) or (fault == "hang_rank1" and rank == 1):
            while True:  # the others block in the next collective; only the launcher's timeout ends this
                time.sleep(60)
        if fault == "kill_rank1" and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    if spec.inject_fault not in FAULTS:
        raise ValueError(f"inject_fault={spec.inject_fault!r} must be one of '', {', '.join(FAULTS[1:])}")
    return hook


def main(argv: list[str] | None = None) -> int:
    def train(spec: Any, out: Path, rank: int) -> dict[str, Any]:
        from bench_model.trial import run_trial

        return run_trial(spec, fault_hook(spec, rank))

    return run_protocol(argv, train)


if __name__ == "__main__":
    exit_with(main())
