"""Local launcher: one `torchrun` per trial on this host (CPU ranks on gloo, or this host's GPUs on NCCL).

Follows docs/trial_protocol.md: writes SPEC.json, runs `python -m torch.distributed.run ... -m bench_model.run --spec
SPEC.json --out RESULT.json`, and turns RESULT.json / `*.err.json` / the exit code / the timeout into one row.

Why processes are found by a token and not only by process group: torchrun starts each worker with
`start_new_session=True` (torch/distributed/elastic/multiprocessing/subprocess_handler), so workers are NOT in
torchrun's process group, and a SIGKILLed torchrun leaves them orphaned (reparented to init). Every process of a trial
inherits `AUTOTUNE_TRIAL_TOKEN=<uuid>` in its environment; killing a trial signals torchrun's group and then every
process whose /proc/<pid>/environ carries the token (SIGTERM, grace, SIGKILL).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from autotune.core.errors import UsageError
from autotune.core.trial import TrialSpec
from launchers.base import Launcher, ThreadedTrialHandle, launcher_names
from launchers.protocol import (
    REPO_ROOT,
    RESULT_FILE,
    SPEC_FILE,
    assemble_row,
    free_port,
    prepare_trial_dir,
    rank_args,
    utc_now,
)

# CPU ranks per host: gloo ranks are processes of ~0.4 GB each; beyond 8 a 2-core box spends its time in start-up
# (~40 s per world-8 run, docs/architecture.md "Measured costs"). Raise it with AUTOTUNE_LOCAL_MAX_CPU_RANKS on a
# bigger host.
DEFAULT_MAX_CPU_RANKS = 8
KILL_GRACE_S = 5.0


def pids_with_token(token: str) -> list[int]:
    """Every live process of ours whose environment holds AUTOTUNE_TRIAL_TOKEN=token."""
    return pids_with_tokens({token})


def pids_with_tokens(tokens: set[str]) -> list[int]:
    needles = {f"AUTOTUNE_TRIAL_TOKEN={t}".encode() for t in tokens}
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                if needles.intersection(fh.read().split(b"\0")):
                    found.append(int(entry.name))
        except OSError:  # exited meanwhile, or not ours
            continue
    return found


SETPRIV = shutil.which("setpriv")


def _signal_all(proc: subprocess.Popen, token: str, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids_with_token(token):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_trial(proc: subprocess.Popen, token: str, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM torchrun's group and every process of the trial, wait up to `grace_s`, then SIGKILL what is left."""
    _signal_all(proc, token, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not pids_with_token(token):
            return
        time.sleep(0.1)
    _signal_all(proc, token, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL is a kernel matter
        pass


TOKEN_FILE = "TOKEN"


def reap_orphans(token_files: list[Path], grace_s: float = KILL_GRACE_S) -> int:
    """Kill the processes of earlier attempts (a controller SIGKILLed mid-trial leaves torchrun and its workers
    running: they are in their own sessions). Returns how many processes were signalled."""
    tokens = set()
    for f in token_files:
        try:
            tokens.add(f.read_text().strip())
        except OSError:
            continue
    tokens.discard("")
    pids = pids_with_tokens(tokens) if tokens else []
    if not pids:
        return 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_with_tokens(tokens):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and pids_with_tokens(tokens):
            time.sleep(0.1)
    return len(pids)


class LocalTrialHandle(ThreadedTrialHandle):
    def __init__(self, spec: TrialSpec, launcher: LocalLauncher) -> None:
        self.spec = spec
        self.trial_dir = prepare_trial_dir(launcher.workdir, spec)
        self.spec_path = self.trial_dir / SPEC_FILE
        self.result_path = self.trial_dir / RESULT_FILE
        self.log_path = launcher.log_dir / f"{spec.trial_id}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        reap_orphans([self.trial_dir / TOKEN_FILE])  # a previous attempt left behind by a killed controller
        self.token = uuid.uuid4().hex
        (self.trial_dir / TOKEN_FILE).write_text(self.token)
        self._backend = launcher.name
        self._grace_s = launcher.kill_grace_s
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._row: dict[str, Any] | None = None
        self.started_at = utc_now()
        self._t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                launcher.command(spec, self.spec_path, self.result_path),
                cwd=REPO_ROOT,
                env=launcher.environment(self.token),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._watcher = threading.Thread(target=self._watch, name=f"trial-{spec.trial_id}", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        deadline = self._t0 + float(self.spec.timeout_s)
        timed_out = cancelled = False
        while self.proc.poll() is None:
            if self._cancel.is_set():
                cancelled = True
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            self._cancel.wait(0.2)
        if timed_out or cancelled:
            kill_trial(self.proc, self.token, self._grace_s)
        else:
            leftovers = pids_with_token(self.token)  # workers orphaned by a torchrun that died first
            if leftovers:
                kill_trial(self.proc, self.token, self._grace_s)
        wall_s = time.monotonic() - self._t0
        self._row = assemble_row(
            self.spec,
            self.result_path,
            timed_out=timed_out,
            cancelled=cancelled,
            returncode=self.proc.returncode,
            started_at=self.started_at,
            ended_at=utc_now(),
            wall_s=wall_s,
            log_path=str(self.log_path),
            backend=self._backend,
        )
        self._done.set()

    def _request_cancel(self) -> None:
        self._cancel.set()


class LocalLauncher(Launcher):
    """`LocalLauncher(workdir=..., nproc_per_node=None, log_dir=...)`; several handles may be in flight at once."""

    name = "local"

    def __init__(
        self,
        workdir: str | Path | None = None,
        nproc_per_node: int | None = None,
        log_dir: str | Path | None = None,
        python: str | None = None,
        kill_grace_s: float = KILL_GRACE_S,
        module: str = "bench_model.run",
    ) -> None:
        self.module = module  # the trial entry point (docs/trial_protocol.md); another only for protocol tests
        # absolute: rows carry log_path, which must stay valid from wherever the folder is read
        self.workdir = (Path(workdir) if workdir is not None else Path("results") / "_local_trials").resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir).resolve() if log_dir is not None else self.workdir / "logs"
        self.nproc_per_node = nproc_per_node
        self.python = python or sys.executable
        self.kill_grace_s = kill_grace_s
        self._gpus: int | None = None
        reap_orphans(sorted(self.workdir.glob(f"*/{TOKEN_FILE}")), kill_grace_s)

    def num_visible_gpus(self) -> int:
        if self._gpus is None:
            import torch  # lazy: only a real local run needs it

            self._gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return self._gpus

    def max_world_size(self) -> int:
        gpus = self.num_visible_gpus()
        if gpus:
            return gpus
        return int(os.environ.get("AUTOTUNE_LOCAL_MAX_CPU_RANKS", DEFAULT_MAX_CPU_RANKS))

    def describe_limit(self) -> str:
        gpus = self.num_visible_gpus()
        return f"{gpus} visible GPU(s)" if gpus else f"{self.max_world_size()} CPU ranks (AUTOTUNE_LOCAL_MAX_CPU_RANKS)"

    def command(self, spec: TrialSpec, spec_path: Path, result_path: Path) -> list[str]:
        nproc = self.nproc_per_node or spec.plan.world_size
        if nproc != spec.plan.world_size:
            raise UsageError(
                f"nproc_per_node={nproc} != plan world size {spec.plan.world_size}: "
                "the local launcher runs one trial on one host"
            )
        # setpriv --pdeathsig: torchrun dies with the controller (a SIGKILLed controller must not leave a trial running;
        # the ranks follow torchrun, see launchers.protocol.die_with_parent).
        prefix = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
        return prefix + [
            self.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(nproc),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(free_port()),
            "--max-restarts",
            "0",
            *rank_args(self.module, spec_path.resolve(), result_path.resolve()),
        ]

    def environment(self, token: str) -> dict[str, str]:
        env = dict(os.environ)
        env["AUTOTUNE_TRIAL_TOKEN"] = token
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("OMP_NUM_THREADS", "1")  # N ranks share the host's cores; torchrun would say the same
        # Keep collectives on loopback: gloo and NCCL bootstrap bind the interface named here.
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def submit(self, spec: TrialSpec) -> LocalTrialHandle:
        limit = self.max_world_size()
        if spec.plan.world_size > limit:
            raise UsageError(
                f"plan world size {spec.plan.world_size} exceeds the local backend's {self.describe_limit()}"
                f"; use --backend {'|'.join(launcher_names(besides=self.name))}"
            )
        return LocalTrialHandle(spec, self)
