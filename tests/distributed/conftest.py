"""Helpers of the distributed suite: real torchrun launches on gloo over 127.0.0.1 (no mocks), the 1-rank reference
computed once per session in-process, and spec construction from the real config tree."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "multi_layout.py"
# Small enough for a 2-core CI box, big enough that every layout has real work: tiny model, 4 sequences of 128 tokens.
BASE = ["model=tiny", "train.global_batch_size=4"]
STEPS = dict(warmup_steps=1, timed_steps=4)  # 5 optimizer steps, all losses compared


def make_spec(num_gpus: int, precision: str = "fp32", overrides: tuple[str, ...] = (), **extra):
    from autotune.results.trialfile import make_spec as _make
    from autotune.spec.config import load_config

    cfg = load_config([*BASE, f"train.precision={precision}", *overrides])
    fields = dict(STEPS, timeout_s=1800.0)
    fields.update(extra)
    return _make(cfg, cfg.plan(num_gpus), trial_id=f"t{uuid.uuid4().hex[:8]}", **fields)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_env(token: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO),
        OMP_NUM_THREADS="1",
        GLOO_SOCKET_IFNAME="lo",
        AUTOTUNE_TEST_TOKEN=token,
        PYTHONUNBUFFERED="1",
    )
    return env


def torchrun(nproc: int, args: list[str], log: Path, timeout_s: float = 1700.0) -> tuple[int, str]:
    """Run `torchrun --nproc-per-node nproc <args>`; returns (exit code, token carried by every process)."""
    token = uuid.uuid4().hex
    cmd = [
        sys.executable,
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
        *args,
    ]
    with open(log, "wb") as fh:
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            env=torchrun_env(token),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    return proc.returncode, token


def pids_with_token(token: str) -> list[int]:
    needle = f"AUTOTUNE_TEST_TOKEN={token}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def run_layouts(specs: dict, workdir: Path) -> dict[str, dict]:
    """All `specs` (same world size) in one torchrun launch; returns name -> result row (raises with the log tail)."""
    worlds = {s.plan.world_size for s in specs.values()}
    assert len(worlds) == 1, worlds
    workdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, spec in specs.items():
        path = workdir / f"{name}.json"
        path.write_text(spec.to_json())
        paths.append(str(path))
    log = workdir / "torchrun.log"
    code, _ = torchrun(worlds.pop(), [str(DRIVER), str(workdir), *paths], log)
    rows = {}
    for name in specs:
        out = workdir / f"{name}.result.json"
        if out.exists():
            rows[name] = json.loads(out.read_text())
    if code != 0 or len(rows) != len(specs):
        # the first traceback is the rank that failed first; the others' ("connection closed by peer") follow from it
        text = log.read_text(errors="replace")
        first = text.find("Traceback (most recent call last)")
        head = f"first traceback:\n{text[first : first + 3000]}\n" if first >= 0 else ""
        missing = sorted(set(specs) - set(rows))
        pytest.fail(
            f"multi-layout launch failed (exit {code}); no result for {missing}; {head}log tail:\n{text[-2000:]}"
        )
    return rows


class LayoutPool:
    """Layouts of every test module of this suite, run per world size in ONE torchrun launch (multi_layout.py) on first
    use: a launch costs every rank its process start and imports (3.8 s of CPU to import bench_model.trial and torch,
    measured), whatever it then runs. Modules register their tables at import (collection precedes every test), so a
    session pays one launch per world size however many files use it, and running one file alone still runs what that
    file registered."""

    def __init__(self) -> None:
        self.layouts: dict[int, dict[str, tuple[str, tuple[str, ...]]]] = {}
        self.rows: dict[int, dict[str, dict]] = {}

    def register(self, world: int, layouts: dict[str, tuple[str, ...]], precision: str = "fp32") -> None:
        table = self.layouts.setdefault(world, {})
        for name, overrides in layouts.items():
            known = table.get(name)
            assert known in (None, (precision, overrides)), f"layout name {name!r} registered twice differently"
            table[name] = (precision, overrides)

    def run(self, world: int, tmp_path_factory) -> dict[str, dict]:
        if world not in self.rows:
            specs = {name: make_spec(world, prec, ov) for name, (prec, ov) in self.layouts[world].items()}
            self.rows[world] = run_layouts(specs, tmp_path_factory.mktemp(f"pool{world}"))
        return self.rows[world]


POOL = LayoutPool()


@pytest.fixture(scope="session")
def pool_rows(tmp_path_factory):
    """`pool_rows(world)` -> name -> result row of every layout registered for that world size (one launch each)."""
    return lambda world: POOL.run(world, tmp_path_factory)


def run_in_process(spec) -> dict:
    """A world of 1 inside the pytest process (no process start-up): the reference curve."""
    import torch.distributed as dist

    from bench_model.trial import run_trial

    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(
        RANK="0",
        WORLD_SIZE="1",
        LOCAL_RANK="0",
        LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
    )
    try:
        return run_trial(spec)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def reference_fp32() -> list[float]:
    return run_in_process(make_spec(1, "fp32"))["losses"]


@pytest.fixture(scope="session")
def reference_fp32_tied() -> list[float]:
    """The 1-rank curve of the same model with tied embedding and output head (one shared matrix)."""
    return run_in_process(make_spec(1, "fp32", ("model.tie_embeddings=true",)))["losses"]


@pytest.fixture(scope="session")
def reference_bf16() -> list[float]:
    return run_in_process(make_spec(1, "bf16"))["losses"]


def max_rel_diff(ref: list[float], got: list[float]) -> float:
    assert len(ref) == len(got), (ref, got)
    return max(abs(a - b) / abs(a) for a, b in zip(ref, got))
