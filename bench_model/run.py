"""Trial entry point (docs/trial_protocol.md): `python -m bench_model.run --spec SPEC.json --out RESULT.json` on every
rank under torchrun, or `main(argv)` in a process that has the torch.distributed environment (a single process
without it runs as a world of 1 on 127.0.0.1).

Rank 0 writes RESULT.json atomically after a barrier and before any teardown. A failing rank writes
RESULT.json.rank<R>.err.json and exits at once with os._exit (3 = oom, 1 = crash) so torchrun tears down the others.
OOM is recognised by type: torch.OutOfMemoryError (CUDA) and MemoryError (CPU; see `as_memory_error`)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_CRASH, EXIT_OOM = 0, 1, 3


def _parse(argv: list[str] | None, prog: str = "bench_model.run") -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="a trial under the trial protocol (docs/trial_protocol.md)")
    parser.add_argument("--spec", required=True, help="TrialSpec JSON file")
    parser.add_argument("--out", required=True, help="result JSON path (rank 0 writes it)")
    return parser.parse_args(argv)


def write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def as_memory_error(exc: BaseException) -> BaseException:
    """torch's CPU allocator reports ENOMEM as a plain c10::Error (RuntimeError "DefaultCPUAllocator: can't allocate
    memory", verified on torch 2.13), not as an exception type. This is the single place that maps it to MemoryError,
    so everything downstream classifies by type. Walks the __cause__/__context__ chain (pipelining re-raises)."""
    seen = exc
    while seen is not None:
        if isinstance(seen, (MemoryError,)) or type(seen).__name__ == "OutOfMemoryError":
            return seen
        if isinstance(seen, RuntimeError) and "DefaultCPUAllocator: can't allocate memory" in str(seen):
            return MemoryError(str(seen).strip().splitlines()[-1])
        seen = seen.__cause__ or seen.__context__
    return exc


# What a surviving rank's collective raises when a peer process vanished (gloo on CPU; NCCL on GPUs). Such an error
# is a consequence, not the cause: the launcher looks for the rank that failed first, or died without a word.
PEER_LOST_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "remote process exited",
    "ncclRemoteError",
    "NCCL communicator was aborted",
)


def is_peer_lost(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if any(marker in str(seen) for marker in PEER_LOST_MARKERS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_oom(exc: BaseException) -> bool:
    import torch

    exc = as_memory_error(exc)
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError))


def die_with_parent() -> None:
    """Linux: SIGKILL this rank when its parent (torchrun, srun's step, a Ray actor) dies, so a killed launcher never
    leaves ranks running. A no-op where prctl is unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _ensure_env() -> None:
    """A bare process (no torchrun) is a world of 1 on loopback."""
    if "RANK" in os.environ:
        return
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(
        RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )


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


def run_protocol(
    argv: list[str] | None, body: Callable[[Any, Path, int], dict[str, Any]], prog: str = "bench_model.run"
) -> int:
    """The trial protocol around `body(spec, out, rank) -> row` (this trainer, or `autotune.fitting.netbench_rank`): rank 0
    writes the row it returns; any exception on any rank becomes that rank's err file and exit code."""
    args = _parse(argv, prog)
    out = Path(args.out)
    die_with_parent()
    _ensure_env()
    rank = int(os.environ["RANK"])
    try:
        from autotune.core.trial import TrialSpec

        spec = TrialSpec.from_json(Path(args.spec).read_text())
        row = body(spec, out, rank)
        if rank == 0:
            write_json_atomic(out, row)
    except BaseException as e:  # noqa: BLE001 - every failure becomes an err file and an exit code
        exc = as_memory_error(e)
        status = "oom" if is_oom(e) else "crash"
        traceback.print_exc()
        err = {
            "rank": rank,
            "status": status,
            "error_type": type(exc).__name__,
            "error_message": (str(exc).strip().splitlines() or [""])[-1][:500],
            "peer_lost": status == "crash" and is_peer_lost(e),
        }
        try:
            write_json_atomic(out.with_name(f"{out.name}.rank{rank}.err.json"), err)
            print(f"[rank {rank}] {status}: {err['error_type']}: {err['error_message']}", file=sys.stderr, flush=True)
        except BaseException:  # noqa: BLE001 - a failed error report must not change the exit code that classifies it
            pass
        return EXIT_OOM if status == "oom" else EXIT_CRASH
    _teardown()
    return EXIT_OK


def exit_with(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    if code != EXIT_OK:
        os._exit(code)  # no teardown: peers may be blocked in a collective; torchrun reaps them
    sys.exit(code)


def _teardown() -> None:
    import torch.distributed as dist

    sys.stdout.flush()
    sys.stderr.flush()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    exit_with(main())
