"""SLURM job states as a trial sees them (split out of launchers/slurm.py): which states are waiting, running or
requeued, the row status of a job that ended without a result file, and the one query that asks SLURM (squeue, then
sacct) about a set of job ids from the submitting host."""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterable

PENDING_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED"}
REQUEUE_STATES = {"NODE_FAIL": "NodeFail", "PREEMPTED": "Preempted", "BOOT_FAIL": "BootFail"}
# terminal state without any result file -> (status, error_type)
TERMINAL_STATUS = {
    "COMPLETED": ("crash", "NoResult"),
    "FAILED": ("crash", "SlurmFailed"),
    "OUT_OF_MEMORY": ("oom", "SlurmOutOfMemory"),
    "TIMEOUT": ("timeout", "Timeout"),
    "DEADLINE": ("timeout", "Timeout"),
    "CANCELLED": ("crash", "Cancelled"),
    "SPECIAL_EXIT": ("crash", "SlurmFailed"),
    "REVOKED": ("crash", "Cancelled"),
    "GONE": ("crash", "NoResult"),
    **{state: ("crash", kind) for state, kind in REQUEUE_STATES.items()},
}
# after our scancel, how long to wait for SLURM to report the job ended before writing the row anyway
CANCEL_WAIT_S = 60.0


def slurm_status(state: str) -> tuple[str, str]:
    """(row status, error_type) of a job that ended in `state` without writing any result file."""
    return TERMINAL_STATUS.get(state, ("crash", "SlurmFailed"))


def query_states(job_ids: Iterable[str]) -> dict[str, str] | None:
    """SLURM state per job id ("123" or array element "123_4"). squeue first (live jobs, and finished ones for
    MinJobAge); sacct for ids squeue no longer knows. An id neither knows is absent. None: squeue itself failed
    (controller briefly unreachable): no information this round, which is not the same as "every job is gone"."""
    wanted = set(job_ids)
    if not wanted:
        return {}
    states: dict[str, str] = {}
    try:
        out = subprocess.run(
            ["squeue", "--states=all", "-h", "-r", "-u", getpass.getuser(), "-o", "%i|%T"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    for line in out.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        if jid in wanted:
            states[jid] = state.strip()
    missing = wanted - set(states)
    if missing:
        acct = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(sorted(missing))],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if acct.returncode == 0:
            for line in acct.stdout.splitlines():
                jid, _, state = line.strip().partition("|")
                if jid in missing and state:
                    states[jid] = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
    return states
