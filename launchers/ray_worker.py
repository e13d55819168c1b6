"""The Ray actor behind one rank (launchers/ray_launcher.py wraps `RankWorker` with ray.remote at launch).

Ray workers import this module for every rank actor, so it stays light: no autotune import, launchers.protocol only
(it imports pyarrow lazily). A rank writes into a scratch folder on ITS node (`tempfile.gettempdir()` there: the
node's TMPDIR), never into the driver's trial folder: the driver gets RESULT.json, the error files and the logs back
through `collect()`, so a trial needs no filesystem shared between the nodes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from launchers.protocol import REPO_ROOT, RESULT_FILE, SPEC_FILE, free_port, rank_args

KILL_GRACE_S = 5.0
LOG_TAIL_BYTES = 1 << 20
SCRATCH_NAME = "autotune-ray"  # <node's temp dir>/autotune-ray/<run key>/


def interface_of(ip: str) -> str | None:
    """The network interface holding `ip` on this node (psutil ships with Ray), for GLOO_SOCKET_IFNAME: left alone,
    gloo resolves the machine's hostname, which on a multi-homed node may name another network than Ray's."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == ip for a in addrs):
            return name
    return None


class RankWorker:
    """Holds one rank's process and the node-local folder it writes into."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.trial_dir: Path | None = None
        self.log_path: Path | None = None

    def node_info(self) -> dict[str, Any]:
        import ray

        ip = ray.util.get_node_ip_address()
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ip,
            "ifname": interface_of(ip),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "scratch": str(Path(tempfile.gettempdir()) / SCRATCH_NAME),
        }

    def free_port(self) -> int:
        import ray

        return free_port(ray.util.get_node_ip_address())

    def start(self, spec_json: str, run_key: str, rank_env: dict[str, str], module: str) -> int:
        """Start the rank in `<scratch>/<run_key>/`; `run_key` is unique per launch, so nothing of an earlier
        attempt (or of another rank's node) can be read back as this one's result."""
        self.trial_dir = Path(tempfile.gettempdir()) / SCRATCH_NAME / run_key
        self.trial_dir.mkdir(parents=True, exist_ok=True)
        spec_path = self.trial_dir / SPEC_FILE
        if not spec_path.exists():
            tmp = self.trial_dir / f".{SPEC_FILE}.{rank_env['RANK']}.tmp"  # ranks of one node share the folder
            tmp.write_text(spec_json)
            os.replace(tmp, spec_path)
        env = dict(os.environ)
        env.update(rank_env)
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        self.log_path = self.trial_dir / f"rank{rank_env['RANK']}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, *rank_args(module, spec_path, self.trial_dir / RESULT_FILE)],
                cwd=str(REPO_ROOT) if REPO_ROOT.is_dir() else None,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self.proc.pid

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, grace_s: float = KILL_GRACE_S) -> int | None:
        """SIGTERM the rank's process group, SIGKILL after `grace_s`."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                return self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll()

    def collect(self) -> dict[str, str]:
        """RESULT.json, this node's *.err.json files and sidecars, and this rank's log tail, as text."""
        out: dict[str, str] = {}
        if self.trial_dir is None:
            return out
        for path in [self.trial_dir / RESULT_FILE, *self.trial_dir.glob(RESULT_FILE + ".*.json")]:
            if path.is_file():
                out[path.name] = path.read_text()
        if self.log_path is not None and self.log_path.is_file():
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, self.log_path.stat().st_size - LOG_TAIL_BYTES))
                out[self.log_path.name] = fh.read().decode(errors="replace")
        return out

    def cleanup(self) -> None:
        """Remove the node-local folder once the driver holds its files (ranks of one node may race: both ignore)."""
        if self.trial_dir is not None:
            shutil.rmtree(self.trial_dir, ignore_errors=True)
