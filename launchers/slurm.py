"""SLURM launcher (submitit): one trial = one job, one SLURM task per rank (per GPU).

Why one task per rank and not torchrun per node: SLURM then owns every rank (scancel, the time limit and
`--kill-on-bad-exit` reach each one directly), the rank numbers are SLURM's own (SLURM_PROCID, SLURM_LOCALID) and no
second rendezvous agent is needed. Each task runs `launchers.sbatch.run_rank`, which maps SLURM's environment onto torch.distributed's
(MASTER_ADDR = first host of SLURM_JOB_NODELIST) and runs `python -m bench_model.run` (docs/trial_protocol.md).

A wave of specs (`submit_many`) becomes one job array per job shape through submitit's `executor.batch()`, capped at
`max_in_flight` running elements (`--array=0-N%K`). One poller thread asks squeue (then sacct, for jobs squeue has
forgotten) about every job of the launcher each `poll_s` and maps SLURM states to row statuses. The row always comes
from RESULT.json / *.err.json on the shared filesystem, never from logs and never from submitit's pickles.
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.core.trial import TrialSpec
from launchers.base import Launcher, ThreadedTrialHandle
from launchers.protocol import (
    REPO_ROOT,
    RESULT_FILE,
    SPEC_FILE,
    assemble_row,
    clear_results,
    has_result_files,
    prepare_trial_dir,
    utc_now,
)
from launchers.sbatch import JobShape, SlurmOptions, check_one_line, executor_parameters, job_shape, run_rank
from launchers.slurm_states import (  # noqa: F401  (slurm_status: re-exported for callers of launchers.slurm)
    CANCEL_WAIT_S,
    PENDING_STATES,
    REQUEUE_STATES,
    RUNNING_STATES,
    query_states,
    slurm_status,
)


def group_by_shape(items: list, opts: SlurmOptions, key: Callable[[Any], TrialSpec]) -> dict[tuple, list]:
    """Items whose trials need the same nodes x tasks x GPUs go into one job array; its time limit is the
    longest any member needs."""
    groups: dict[tuple, list] = {}
    for item in items:
        spec = key(item)
        groups.setdefault((dataclasses.replace(job_shape(spec, opts), time_min=0), spec.sweep_id), []).append(item)
    return {
        (dataclasses.replace(shape, time_min=max(job_shape(key(i), opts).time_min for i in members)), sweep): members
        for (shape, sweep), members in groups.items()
    }


def _setup_lines() -> list[str]:
    return [f"export PYTHONPATH={shlex.quote(str(REPO_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}"]


def trial_script_text(
    specs: list[TrialSpec], opts: SlurmOptions, folder: Path, python: str | None = None
) -> list[tuple[str, list[str]]]:
    """The sbatch scripts a wave of `specs` becomes (one job array per job shape), without submitting: what
    `autotune submit --dry-run` shows. Same parameters as `SlurmLauncher` passes to submitit."""
    from submitit.slurm.slurm import _make_sbatch_string  # submitit's own script writer (no srun needed)

    check_one_line("sweep log folder", str(folder))
    out = []
    for (shape, sweep_id), members in group_by_shape(specs, opts, key=lambda s: s).items():
        params = executor_parameters(shape, opts, f"autotune-{sweep_id}", _setup_lines())
        command = " ".join(
            [shlex.quote(python or sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder / "%j"))]
        )
        text = _make_sbatch_string(
            command=command, folder=folder / "%j", map_count=len(members) if len(members) > 1 else None, **params
        )
        out.append((text, [s.trial_id for s in members]))
    return out


class SlurmTrialHandle(ThreadedTrialHandle):
    def __init__(self, spec: TrialSpec, launcher: SlurmLauncher, trial_dir: Path) -> None:
        self.spec = spec
        self.trial_dir = trial_dir
        self.spec_path = trial_dir / SPEC_FILE
        self.result_path = trial_dir / RESULT_FILE
        self.job: Any = None  # submitit.slurm.slurm.SlurmJob, replaced on requeue
        self.job_ids: list[str] = []
        self.requeues = 0
        self._launcher = launcher
        self._done = threading.Event()
        self._row: dict[str, Any] | None = None
        self._state = "PENDING"
        self._seen = False
        self._t_run: float | None = None
        self.started_at: str | None = None
        self._cancel_requested = False
        self._kill_sent_at: float | None = None
        self._timed_out = False

    # -- called by the launcher's poller thread only
    def _attach(self, job: Any) -> None:
        self.job = job
        self.job_ids.append(str(job.job_id))
        self._seen = False
        self._state = "PENDING"

    def _advance(self, state: str | None, now: float) -> None:
        """One poll: `state` is SLURM's word for the job, None when neither squeue nor sacct knows it."""
        if self._done.is_set():
            return
        if self._kill_sent_at is None and (self._cancel_requested or self._over_time(now)):
            self._timed_out = not self._cancel_requested
            self._scancel()
            self._kill_sent_at = now
        if state is None and not self._seen and self._kill_sent_at is None:
            return  # submitted, not visible to squeue yet
        self._seen = self._seen or state is not None
        state = state or "GONE"  # forgotten by squeue (MinJobAge) and unknown to sacct: judge by the files
        self._state = state
        if state in PENDING_STATES or state in RUNNING_STATES or (state == "GONE" and not self._seen):
            if state in RUNNING_STATES and self._t_run is None:
                self._t_run, self.started_at = now, utc_now()
            if self._kill_sent_at is None or now - self._kill_sent_at < CANCEL_WAIT_S:
                return
        self._finish(state, now)

    def _over_time(self, now: float) -> bool:
        return self._t_run is not None and now - self._t_run > float(self.spec.timeout_s)

    def _scancel(self) -> None:
        subprocess.run(["scancel", str(self.job.job_id)], capture_output=True, timeout=60)

    def _finish(self, state: str, now: float) -> None:
        has_files = has_result_files(self.trial_dir)
        ours = self._timed_out or self._cancel_requested
        # a lost node (NODE_FAIL, ...) is the cause even when a surviving rank wrote an error first (its peer's
        # connection closed): only a finished RESULT.json outranks it
        node_lost = state in REQUEUE_STATES and not ours and not (self.trial_dir / RESULT_FILE).exists()
        if node_lost and self.requeues < self._launcher.options.max_requeues:
            self.requeues += 1
            self._t_run = None
            self._launcher._resubmit(self)
            return
        wall_s = 0.0 if self._t_run is None else now - self._t_run
        row = assemble_row(
            self.spec,
            self.result_path,
            timed_out=self._timed_out and not self._cancel_requested,
            cancelled=self._cancel_requested,
            returncode=None,
            started_at=self.started_at or utc_now(),
            ended_at=utc_now(),
            wall_s=wall_s,
            log_path=self.log_path,
            backend="slurm",
        )
        if (not has_files or node_lost) and not ours:
            status, error_type = slurm_status(state)
            ranks = f"; a surviving rank then wrote: {row.get('error_message') or ''}"[:300] if has_files else ""
            row.update(
                status=status,
                error_type=error_type,
                error_message=f"SLURM job {self.job.job_id} ended {state}"
                + ("" if has_files else " and no rank wrote a result")
                + (f" (after {self.requeues} requeue(s))" if self.requeues else "")
                + ranks,
            )
        self._row = row
        self._done.set()

    def _finish_unsubmitted(self, error: Exception | None) -> None:
        """Cancelled before it was submitted (error None), or sbatch refused it."""
        row = assemble_row(
            self.spec,
            self.result_path,
            timed_out=False,
            cancelled=error is None,
            returncode=None,
            started_at=utc_now(),
            ended_at=utc_now(),
            wall_s=0.0,
            log_path=str(self.trial_dir),
            backend="slurm",
        )
        if error is not None:
            row.update(
                error_type="SubmissionError",
                error_message="submission failed: " + (" ".join(str(error).split()) or type(error).__name__)[-500:],
            )
        self._row = row
        self._done.set()

    def _fail(self, error: Exception) -> None:
        row = assemble_row(
            self.spec,
            self.result_path,
            timed_out=False,
            cancelled=False,
            returncode=None,
            started_at=self.started_at or utc_now(),
            ended_at=utc_now(),
            wall_s=0.0,
            log_path=self.log_path,
            backend="slurm",
        )
        if row["status"] == "crash" and row["error_type"] in (None, "NoResult", "Killed"):
            row.update(error_type=type(error).__name__, error_message=f"slurm launcher: {error}")
        self._row = row
        self._done.set()

    @property
    def log_path(self) -> str:
        try:
            return str(self.job.paths.stdout)
        except Exception:  # submitit path helpers need a job id
            return str(self.trial_dir)

    # -- ThreadedTrialHandle hooks
    def _what(self) -> str:
        return f"trial {self.spec.trial_id} (SLURM job {self.job_ids})"

    def _request_cancel(self) -> None:
        self._cancel_requested = True
        self._launcher._wake.set()

    def _started(self) -> bool:
        return self._state in RUNNING_STATES


class SlurmLauncher(Launcher):
    """`SlurmLauncher(workdir=..., python=..., slurm={...} | partition=..., account=..., ...)`.

    `workdir` must be on a filesystem the compute nodes share (each trial's SPEC.json/RESULT.json and submitit's
    folder live there). SLURM_CONF and the rest of the submitting environment reach the jobs (sbatch --export=ALL)."""

    name = "slurm"

    def __init__(
        self,
        workdir: str | Path | None = None,
        python: str | None = None,
        log_dir: str | Path | None = None,
        slurm: dict[str, Any] | None = None,
        module: str = "bench_model.run",
        **options: Any,
    ) -> None:
        merged = {**(slurm or {}), **options}
        self.options = SlurmOptions.from_mapping(merged)
        self.workdir = Path(workdir if workdir is not None else Path("results") / "_slurm_trials").resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.submitit_dir = Path(log_dir).resolve() if log_dir is not None else self.workdir / "_submitit"
        check_one_line("sweep log folder", str(self.submitit_dir))  # it lands on `#SBATCH --output=` lines
        self.python = python or sys.executable
        self.module = module  # the trial entry point (docs/trial_protocol.md); another only for protocol tests
        self._handles: list[SlurmTrialHandle] = []
        self._queued: list[SlurmTrialHandle] = []  # submit()ted, waiting for the batch window to close
        self._queued_since = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._poller: threading.Thread | None = None

    def _executor(self, shape: JobShape, sweep_id: str) -> Any:
        import submitit  # lazy: `autotune plan` never pays for it

        ex = submitit.SlurmExecutor(folder=self.submitit_dir / "%j", python=shlex.quote(self.python))
        ex.update_parameters(**executor_parameters(shape, self.options, f"autotune-{sweep_id}", _setup_lines()))
        return ex

    def _prepare(self, spec: TrialSpec) -> SlurmTrialHandle:
        return SlurmTrialHandle(spec, self, prepare_trial_dir(self.workdir, spec))

    def submit_many(self, specs: list[TrialSpec]) -> list[SlurmTrialHandle]:
        """Submit a wave now: one job array per job shape (same nodes/tasks/time limit), via submitit's batch()."""
        if self._closed:
            raise RuntimeError("launcher is closed")
        handles = [self._prepare(s) for s in specs]
        self._submit_groups(handles)
        with self._lock:
            self._handles.extend(handles)
            self._ensure_poller()
        return handles

    def submit(self, spec: TrialSpec) -> SlurmTrialHandle:
        """Queue one trial; trials submitted within `batch_window_s` of each other (a controller filling its
        `parallel` slots) leave together as one job array. An sbatch failure becomes that trial's crash row."""
        if self._closed:
            raise RuntimeError("launcher is closed")
        handle = self._prepare(spec)
        with self._lock:
            if not self._queued:
                self._queued_since = time.monotonic()
            self._queued.append(handle)
            self._handles.append(handle)
            self._ensure_poller()
        self._wake.set()
        return handle

    def _submit_groups(self, handles: list[SlurmTrialHandle]) -> None:
        for (shape, sweep_id), members in group_by_shape(handles, self.options, key=lambda h: h.spec).items():
            ex = self._executor(shape, sweep_id)
            with ex.batch():
                jobs = [ex.submit(run_rank, str(h.spec_path), str(h.result_path), self.module) for h in members]
            for h, job in zip(members, jobs):
                h._attach(job)

    def _resubmit(self, handle: SlurmTrialHandle) -> None:
        clear_results(handle.trial_dir)
        ex = self._executor(job_shape(handle.spec, self.options), handle.spec.sweep_id)
        handle._attach(ex.submit(run_rank, str(handle.spec_path), str(handle.result_path), self.module))

    def _ensure_poller(self) -> None:  # caller holds self._lock
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll_loop, name="slurm-poller", daemon=True)
            self._poller.start()

    def _take_due(self, now: float) -> tuple[list[SlurmTrialHandle], list[SlurmTrialHandle]] | None:
        """(queued batch now due, submitted active handles), or None when there is nothing left to watch."""
        with self._lock:
            batch: list[SlurmTrialHandle] = []
            cancelled = [h for h in self._queued if h._cancel_requested]
            self._queued = [h for h in self._queued if not h._cancel_requested]
            if self._queued and (self._closed or now - self._queued_since >= self.options.batch_window_s):
                batch, self._queued = self._queued, []
            active = [h for h in self._handles if not h.done() and h.job is not None]
            if not (active or batch or self._queued or cancelled):
                self._poller = None
                return None
        for h in cancelled:
            h._finish_unsubmitted(None)
        return batch, active

    def _poll_loop(self) -> None:
        last_poll = 0.0
        while True:
            due = self._take_due(time.monotonic())
            if due is None:
                return
            batch, active = due
            if batch:
                try:
                    self._submit_groups(batch)
                except Exception as e:  # sbatch refused (bad partition, ...): those trials crash with its words
                    for h in batch:
                        if h.job is None:
                            h._finish_unsubmitted(e)
                last_poll = 0.0
            now = time.monotonic()
            if active and now - last_poll >= self.options.poll_s or any(h._cancel_requested for h in active):
                states = query_states(str(h.job.job_id) for h in active)
                last_poll = now = time.monotonic()
                for h in active if states is not None else ():
                    try:
                        h._advance(states.get(str(h.job.job_id)), now)
                    except Exception as e:  # a broken trial must not stop the poller for all the others
                        h._fail(e)
            self._wake.wait(min(self.options.poll_s, self.options.batch_window_s))
            self._wake.clear()

    def close(self) -> None:
        """Cancel every job still pending or running (a stopped sweep leaves nothing behind in the queue)."""
        self._closed = True
        with self._lock:
            active = [h for h in self._handles if not h.done()]
        for h in active:
            h._cancel_requested = True
        self._wake.set()
        for h in active:
            h._done.wait(CANCEL_WAIT_S + 2 * self.options.poll_s + 10)
