"""The trial protocol (docs/trial_protocol.md), both halves in one module. Rank side (imported by bench_model/run.py
and autotune/fitting/netbench_rank.py): `run_protocol` around a trial body, the atomic RESULT.json / err-file writes,
exit codes and OOM / lost-peer classification. Launcher side, shared by every launcher: file names, the per-trial
folder, the rank command, free ports and the one function that turns a trial's files into its row. Both sides stamp
rows with the same `utc_now` and `code_version`.

Like submitit's `core`, every backend imports this module and none imports another backend. It stays light (standard
library only at import time): SLURM tasks and Ray rank actors import it on every rank, so autotune.results.schema (pyarrow)
is imported inside `assemble_row`, where only the controller calls it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.core.trial import TrialSpec

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC_FILE = "SPEC.json"
RESULT_FILE = "RESULT.json"
ERR_GLOB = RESULT_FILE + ".rank*.err.json"  # one per failed rank: RESULT.json.rank<R>.err.json


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port free on `address` right now (the OS picks it; a tiny race with other binders is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


# What every rank of a GPU cluster needs beyond torch.distributed's env:// variables (docs/engines.md "NCCL
# readiness"). Site-specific values (which NIC: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_HCA, ...) are the
# user's: they reach the ranks from the submitting environment and are never overwritten here.
NCCL_DEFAULTS = {
    # a failed or timed-out NCCL collective tears the process down (torch's default, 3, only skips the cleanup and may
    # leave the rank blocked), so the rank exits non-zero and the launcher ends its peers on every host
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}
# Megatron-LM requires 1 for TP/SP communication overlap: one hardware queue keeps the TP collective's kernel ahead of
# the GEMM it overlaps with (megatron/training/arguments.py checks it when sequence parallelism is on)
TP_OVERLAP_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def rank_comm_env(environ: dict[str, str], master_addr: str, tp: int, num_hosts: int = 1) -> dict[str, str]:
    """The communication variables a rank gets on top of `environ` (which wins for every name it sets): loopback
    interfaces when the whole job is on this host, NCCL error handling, and the TP-overlap stream setting.

    Loopback needs both tests: on a multi-host job rank 0's own lookup of its hostname may give a loopback address
    (Debian's /etc/hosts maps the hostname to 127.0.1.1), yet its peers reach it over the network, so its gloo/NCCL
    sockets must not be pinned to `lo`."""
    env: dict[str, str] = {}
    if master_addr.startswith("127.") and num_hosts == 1:  # one host: keep gloo/NCCL bootstrap on loopback
        env.update(GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo")
    env.update(NCCL_DEFAULTS)
    if tp > 1:
        env.update(TP_OVERLAP_ENV)
    return {k: v for k, v in env.items() if k not in environ}


_CODE_VERSION: str | None = None


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None


def code_version() -> str:
    """The one `code_version` of every row (ok rows from the trainer, rows the launcher builds): a PEP 440 version
    `<package version>+g<git short hash>[.dirty]` of the repo this code runs from (".dirty": uncommitted changes to
    tracked files), just the package version outside git."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        from autotune import __version__

        head = _git("rev-parse", "--short", "HEAD")
        sha = head.stdout.strip() if head is not None and head.returncode == 0 else ""
        if not sha:
            _CODE_VERSION = __version__
        else:
            diff = _git("diff", "--quiet", "HEAD", "--")
            _CODE_VERSION = f"{__version__}+g{sha}" + (".dirty" if diff is not None and diff.returncode == 1 else "")
    return _CODE_VERSION


def hostname() -> str:
    return socket.gethostname()


# ---------------------------------------------------------------- rank side

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


# ---------------------------------------------------------------- launcher side


def clear_results(trial_dir: Path) -> None:
    """Delete RESULT.json and every sidecar of an earlier attempt: a re-run must not read an old result."""
    for stale in trial_dir.glob(RESULT_FILE + "*"):
        stale.unlink(missing_ok=True)


def prepare_trial_dir(workdir: Path, spec: TrialSpec) -> Path:
    """`<workdir>/<trial_id>/` with a fresh SPEC.json and no result of an earlier attempt."""
    trial_dir = workdir / spec.trial_id
    trial_dir.mkdir(parents=True, exist_ok=True)
    clear_results(trial_dir)
    (trial_dir / SPEC_FILE).write_text(spec.to_json())
    return trial_dir


def has_result_files(trial_dir: Path) -> bool:
    """Did any rank write RESULT.json or an error file (the row then comes from them, not from how the job ended)?"""
    return (trial_dir / RESULT_FILE).exists() or any(trial_dir.glob(ERR_GLOB))


def rank_args(module: str, spec_path: Path | str, result_path: Path | str) -> list[str]:
    """What every rank runs after `python`: `-m bench_model.run --spec SPEC.json --out RESULT.json`."""
    return ["-m", module, "--spec", str(spec_path), "--out", str(result_path)]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def assemble_row(
    spec: TrialSpec,
    result_path: Path,
    *,
    timed_out: bool,
    cancelled: bool,
    returncode: int | None,
    started_at: str,
    ended_at: str,
    wall_s: float,
    log_path: str,
    backend: str,
    runner: str = "torchrun",
) -> dict[str, Any]:
    """docs/trial_protocol.md "What the launcher does with it": RESULT.json first, then *.err.json, then how it ended.
    `runner` names what started the ranks in the message of a trial that ended without any file."""
    from autotune.results.schema import normalize_row, row_from_spec

    result = _read_json(result_path) if result_path.exists() else None
    if result is not None:
        row = dict(result)
    else:
        row = row_from_spec(spec)
        row.update(_outcome_without_result(spec, result_path, timed_out, cancelled, returncode, runner))
    row["backend"] = backend
    defaults = dict(
        started_at=started_at,
        ended_at=ended_at,
        wall_s=wall_s,
        log_path=log_path,
        hostname=socket.gethostname(),
        code_version=code_version(),
        sweep_id=spec.sweep_id,
        trial_id=spec.trial_id,
    )
    for key, value in defaults.items():
        if row.get(key) is None:
            row[key] = value
    if row.get("gpu_seconds") is None:  # wall_s x world, the trainer's wall_s when it wrote one
        row["gpu_seconds"] = float(row["wall_s"]) * spec.plan.world_size
    defaults["gpu_seconds"] = wall_s * spec.plan.world_size
    try:
        return normalize_row(row)
    except ValueError as e:  # the trainer broke the protocol: keep the trial, say why
        bad = row_from_spec(spec)
        bad.update(backend=backend, status="crash", error_type="ProtocolError", error_message=str(e))
        bad.update({k: v for k, v in defaults.items() if bad.get(k) is None})
        return normalize_row(bad)


def _outcome_without_result(
    spec: TrialSpec, result_path: Path, timed_out: bool, cancelled: bool, returncode: int | None, runner: str
) -> dict[str, Any]:
    """status / error_type / error_message of a trial whose rank 0 wrote no RESULT.json."""
    # Oldest first: the rank that failed first is the root cause; the others then see "Connection closed by peer".
    err_files = sorted(
        result_path.parent.glob(result_path.name + ".rank*.err.json"), key=lambda p: p.stat().st_mtime_ns
    )
    errors = [e for e in (_read_json(p) for p in err_files) if e]
    causes = [e for e in errors if not e.get("peer_lost")]  # a lost peer is a consequence, never the cause
    if causes:
        err = next((e for e in causes if e.get("status") == "oom"), causes[0])  # an oom on any rank wins
        return dict(
            status=err.get("status") if err.get("status") in ("oom", "crash") else "crash",
            error_type=err.get("error_type"),
            error_message=f"rank {err.get('rank')}: {err.get('error_message')}",
        )
    if timed_out:  # (a peer_lost file here is a rank noticing the launcher's own kill)
        return dict(
            status="timeout",
            error_type="Timeout",
            error_message=f"no result after timeout_s={spec.timeout_s:g}; process group killed",
        )
    if cancelled:
        return dict(status="crash", error_type="Cancelled", error_message="cancelled by the controller")
    if errors:  # every error file says "my peer vanished": a rank died without writing one (signal, OOM killer)
        silent = sorted(set(range(spec.plan.world_size)) - {e.get("rank") for e in errors})
        return dict(
            status="crash",
            error_type="Killed",
            error_message=f"rank(s) {silent} died without writing an error (killed by a signal?); "
            f"rank {errors[0].get('rank')} then saw: {errors[0].get('error_message')}",
        )
    how = (
        f"signal {signal.Signals(-returncode).name}"
        if returncode is not None and returncode < 0
        else f"exit code {returncode}"
    )
    return dict(
        status="crash",
        error_type="Killed" if returncode else "NoResult",
        error_message=f"{runner} ended with {how} and no rank wrote a result",
    )
