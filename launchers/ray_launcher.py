"""Ray launcher: one trial = one placement group of N bundles (GPU:1 each on GPU clusters, CPU only on `cluster=cpu`)
and one actor per rank (launchers/ray_worker.py).

Each actor starts `python -m bench_model.run` as a child process with the torch.distributed environment: MASTER_ADDR
is rank 0's node address, MASTER_PORT a port free on that node, GLOO_SOCKET_IFNAME the interface of the rank's node
address, LOCAL_RANK the rank's GPU among the GPUs Ray gave the trial's actors on that node (CUDA_VISIBLE_DEVICES is
set to that union, as Ray Train does, so NCCL sees its peers). The driver polls the ranks, tears the others down when
one fails (what torchrun does locally), kills every rank at `timeout_s`, and copies RESULT.json / *.err.json / logs
back from the actors, whose ranks write into their own node's temp folder: the row needs no shared filesystem. When a
node dies under a trial, the ranks left are stopped and the row is crash / NodeLost naming the node. The placement
group is removed after every trial; PLACEMENT.json in the driver's trial folder records where each rank ran.

Tests run Ray on two virtual nodes (network namespaces on a private bridge: docs/engines.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from autotune.core.errors import SpecError, UsageError
from autotune.core.trial import TrialSpec
from launchers.base import Launcher, ThreadedTrialHandle
from launchers.protocol import REPO_ROOT, RESULT_FILE, assemble_row, prepare_trial_dir, rank_comm_env, utc_now
from launchers.ray_worker import RankWorker

POLL_S = 0.5
PEER_GRACE_S = 10.0  # after one rank fails, how long its peers get to write their own error file
SURVEY_TIMEOUT_S = 30.0  # after a rank's actor died: how long a live actor may take to answer
PLACEMENT_FILE = "PLACEMENT.json"  # driver side: rank -> node id, node address, the node's scratch folder


class NodeLost(RuntimeError):
    """A node holding ranks of the trial left the cluster (raylet dead, host down) while the trial ran."""


class ActorLost(RuntimeError):
    """A rank's actor died while its node stayed in the cluster (its worker process was killed)."""


def ray_rank_envs(infos: list[dict[str, Any]], master_addr: str, master_port: int, tp: int = 1) -> list[dict[str, str]]:
    """torch.distributed env per rank from the actors' (node, GPU ids): ranks on one node share one
    CUDA_VISIBLE_DEVICES (their GPUs' union) and LOCAL_RANK indexes it; on CPU LOCAL_RANK counts ranks per node.
    The communication variables (loopback on one host, NCCL error handling, TP overlap) are the SLURM launcher's
    (protocol.rank_comm_env); on several nodes GLOO_SOCKET_IFNAME is the interface of the rank's Ray node address."""
    world = len(infos)
    by_node: dict[str, list[int]] = {}
    for rank, info in enumerate(infos):
        by_node.setdefault(info["node_id"], []).append(rank)
    envs = []
    for rank, info in enumerate(infos):
        peers = by_node[info["node_id"]]
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(len(peers)),
            "GROUP_RANK": str(list(by_node).index(info["node_id"])),
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(master_port),
            "LOCAL_RANK": str(peers.index(rank)),
        }
        gpus = sorted({g for r in peers for g in infos[r]["gpu_ids"]}, key=lambda g: (len(g), g))
        if info["gpu_ids"]:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            env["LOCAL_RANK"] = str(gpus.index(info["gpu_ids"][0]))
        env.update(rank_comm_env(dict(os.environ), master_addr, tp, num_hosts=len(by_node)))
        if "GLOO_SOCKET_IFNAME" not in env and info.get("ifname") and "GLOO_SOCKET_IFNAME" not in os.environ:
            env["GLOO_SOCKET_IFNAME"] = info["ifname"]  # the interface of Ray's node address: peers reach it
        envs.append(env)
    return envs


class RayTrialHandle(ThreadedTrialHandle):
    def __init__(self, spec: TrialSpec, launcher: RayLauncher) -> None:
        self.spec = spec
        self._launcher = launcher
        self.trial_dir = prepare_trial_dir(launcher.workdir, spec)
        self.result_path = self.trial_dir / RESULT_FILE
        self.log_path = launcher.log_dir / f"{spec.trial_id}.log"
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._running = False
        self._row: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name=f"ray-{spec.trial_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0, started_at = time.monotonic(), utc_now()
        outcome: dict[str, Any] = {"timed_out": False, "cancelled": False, "returncode": None}
        pg, actors = None, []
        try:
            pg, actors, outcome = self._launcher._run_trial(self, outcome)
        except Exception as e:  # Ray refused (bad address, lost node): the trial crashes with its words
            outcome["error"] = e
        finally:
            self._launcher._release(pg, actors)
        wall_s = time.monotonic() - outcome.get("t_start", t0)
        row = assemble_row(
            self.spec,
            self.result_path,
            timed_out=outcome["timed_out"],
            cancelled=outcome["cancelled"],
            returncode=outcome["returncode"],
            started_at=outcome.get("started_at", started_at),
            ended_at=utc_now(),
            wall_s=wall_s,
            log_path=str(self.log_path),
            backend=self._launcher.name,
            runner="a Ray rank",
        )
        error = outcome.get("error")
        lost = (
            isinstance(error, (NodeLost, ActorLost)) and row["status"] != "ok"
        )  # the root cause, whatever the peers wrote
        if error is not None and (lost or row["error_type"] in ("NoResult", "Killed")):
            message = ("ray: " + " ".join(str(error).split()))[:500]
            row.update(status="crash", error_type=type(error).__name__, error_message=message)
        self._row = row
        self._done.set()

    def _request_cancel(self) -> None:
        self._cancel.set()

    def _started(self) -> bool:
        return bool(self._running)


class RayLauncher(Launcher):
    """`RayLauncher(workdir=..., ray={"address": None | "auto" | "host:port", "num_cpus": ..., "gpus_per_rank": ...,
    "cpus_per_rank": 1})`. Without an address it starts a local Ray bound to 127.0.0.1 and stops it on close()."""

    name = "ray"
    OPTIONS = ("address", "num_cpus", "gpus_per_rank", "cpus_per_rank")

    def __init__(
        self,
        workdir: str | Path | None = None,
        log_dir: str | Path | None = None,
        ray: dict[str, Any] | None = None,
        module: str = "bench_model.run",
        **options: Any,
    ) -> None:
        merged = {**(ray or {}), **options}
        unknown = sorted(set(merged) - set(self.OPTIONS))
        if unknown:
            raise SpecError(f"sweep.ray.{unknown[0]}: unknown key (known: {', '.join(self.OPTIONS)})")
        self.address = merged.get("address")
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise SpecError(f"sweep.ray.address={self.address!r} must be null, 'auto' or 'host:port'")
        self.num_cpus = _count("num_cpus", merged.get("num_cpus"), max(8, os.cpu_count() or 1))
        self.cpus_per_rank = _count("cpus_per_rank", merged.get("cpus_per_rank"), 1)
        self.gpus_per_rank = merged.get("gpus_per_rank")
        if self.gpus_per_rank is not None and (
            isinstance(self.gpus_per_rank, bool)
            or not isinstance(self.gpus_per_rank, (int, float))
            or self.gpus_per_rank < 0
        ):
            raise SpecError(f"sweep.ray.gpus_per_rank={self.gpus_per_rank!r} must be null or a number >= 0")
        self.workdir = Path(workdir if workdir is not None else Path("results") / "_ray_trials").resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir).resolve() if log_dir is not None else self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.module = module  # the trial entry point (docs/trial_protocol.md); another only for protocol tests
        self._started_ray = False
        self._temp_dir = ""
        self._lock = threading.Lock()
        self._worker_cls: Any = None
        self._handles: list[RayTrialHandle] = []

    def max_world_size(self) -> int | None:
        return None if self.address else self.num_cpus // self.cpus_per_rank

    def describe_limit(self) -> str:
        return f"{self.max_world_size()} CPU ranks of the local Ray (sweep.ray.num_cpus)"

    def _ensure_ray(self) -> Any:
        import ray  # lazy: only this backend pays for it

        with self._lock:
            if not ray.is_initialized():
                path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
                env = {"env_vars": {"PYTHONPATH": path}}
                if self.address:
                    ray.init(address=self.address, runtime_env=env, log_to_driver=False)
                else:
                    self._start_local_ray(ray, env)
            if self._worker_cls is None:
                self._worker_cls = ray.remote(RankWorker)
        return ray

    def _start_local_ray(self, ray: Any, runtime_env: dict[str, Any]) -> None:
        """address="local": never attach to another Ray found on this host; own temp dir: no shared state. No
        prestarted idle workers (num_cpus of them would compete with the ranks on a small box). Ray gives its raylet a
        fixed 30 s to register; on an overloaded host that can pass, so one more try."""
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self._temp_dir = f"/tmp/ray-autotune-{os.getpid()}"
        for attempt in (1, 2):
            try:
                ray.init(
                    address="local",
                    num_cpus=self.num_cpus,
                    include_dashboard=False,
                    log_to_driver=False,
                    _node_ip_address="127.0.0.1",
                    _temp_dir=self._temp_dir,
                    runtime_env=runtime_env,
                    _system_config={"enable_worker_prestart": False, "prestart_worker_first_driver": False},
                )
                break
            except Exception:  # noqa: BLE001 - Ray raises a bare Exception for the start-up timeout
                ray.shutdown()
                if attempt == 2:
                    import shutil

                    shutil.rmtree(self._temp_dir, ignore_errors=True)
                    raise
        self._started_ray = True

    def submit(self, spec: TrialSpec) -> RayTrialHandle:
        limit = self.max_world_size()
        if limit is not None and spec.plan.world_size > limit:
            raise UsageError(
                f"plan world size {spec.plan.world_size} exceeds the local Ray's {limit} CPU slots "
                "(sweep.ray.num_cpus / cpus_per_rank)"
            )
        self._ensure_ray()
        handle = RayTrialHandle(spec, self)
        with self._lock:
            self._handles.append(handle)
        return handle

    def _gpus_per_rank(self, spec: TrialSpec) -> float:
        if self.gpus_per_rank is not None:
            return float(self.gpus_per_rank)
        return 1.0 if spec.cluster.device_type == "cuda" else 0.0

    def _run_trial(self, handle: RayTrialHandle, outcome: dict[str, Any]) -> tuple[Any, list, dict[str, Any]]:
        ray = self._ensure_ray()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        spec, world, gpus = handle.spec, handle.spec.plan.world_size, self._gpus_per_rank(handle.spec)
        bundle = {"CPU": float(self.cpus_per_rank), **({"GPU": gpus} if gpus else {})}
        pg = placement_group([dict(bundle) for _ in range(world)], strategy="PACK")
        actors: list = []
        while not _ready(ray, pg.ready(), POLL_S):  # queued for resources: not counted against timeout_s
            if handle._cancel.is_set():
                outcome["cancelled"] = True
                return pg, actors, outcome
        actors = [
            self._worker_cls.options(
                num_cpus=self.cpus_per_rank,
                num_gpus=gpus,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=i
                ),
            ).remote()
            for i in range(world)
        ]
        infos = ray.get([a.node_info.remote() for a in actors])
        port = ray.get(actors[0].free_port.remote())
        envs = ray_rank_envs(infos, infos[0]["ip"], port, spec.plan.tp)
        placement = [{"rank": r, **{k: i[k] for k in ("node_id", "ip", "scratch")}} for r, i in enumerate(infos)]
        (handle.trial_dir / PLACEMENT_FILE).write_text(json.dumps(placement, indent=1) + "\n")
        run_key = f"{spec.sweep_id}-{spec.trial_id}-{uuid.uuid4().hex[:8]}"
        outcome.update(t_start=time.monotonic(), started_at=utc_now())
        ray.get([a.start.remote(spec.to_json(), run_key, env, self.module) for a, env in zip(actors, envs)])
        handle._running = True
        alive = list(range(world))
        try:
            self._watch(ray, handle, actors, outcome)
        except ray.exceptions.RayActorError as e:  # an actor's node went away: end the ranks left, say which node
            alive = self._survivors(ray, actors)
            ray.get([actors[r].stop.remote() for r in alive])
            dead_nodes = {n["NodeID"] for n in ray.nodes() if not n["Alive"]}
            outcome["error"] = lost_ranks_error(infos, alive, dead_nodes, e)
        self._collect(ray, handle, [(r, actors[r]) for r in alive])
        return pg, actors, outcome

    def _watch(self, ray: Any, handle: RayTrialHandle, actors: list, outcome: dict[str, Any]) -> None:
        deadline = outcome["t_start"] + float(handle.spec.timeout_s)
        failed_at: float | None = None
        while True:
            codes = ray.get([a.poll.remote() for a in actors])
            bad = [c for c in codes if c not in (None, 0)]
            if bad and failed_at is None:
                failed_at = time.monotonic()
                outcome["returncode"] = bad[0]
            if all(c is not None for c in codes):
                outcome["returncode"] = bad[0] if bad else 0
                return
            if handle._cancel.is_set():
                outcome["cancelled"] = True
            elif time.monotonic() >= deadline:
                outcome["timed_out"] = True
            elif failed_at is None or time.monotonic() - failed_at < PEER_GRACE_S:
                time.sleep(POLL_S)
                continue
            # cancelled, timed out, or a failed rank's peers are stuck in a collective: stop every rank
            ray.get([a.stop.remote() for a in actors])
            return

    def _survivors(self, ray: Any, actors: list) -> list[int]:
        """Ranks whose actor still answers, all asked at once: one on a dead node raises, or, before Ray has marked
        the node dead, does not answer within SURVEY_TIMEOUT_S."""
        refs = [a.poll.remote() for a in actors]
        answered, _ = ray.wait(refs, num_returns=len(refs), timeout=SURVEY_TIMEOUT_S)
        alive = []
        for rank, ref in enumerate(refs):
            if ref not in answered:
                continue
            try:
                ray.get(ref)
                alive.append(rank)
            except ray.exceptions.RayActorError:
                pass
        return alive

    def _collect(self, ray: Any, handle: RayTrialHandle, ranks: list[tuple[int, Any]]) -> None:
        """Bring result/error files and logs back from the ranks' nodes (no shared filesystem needed): the files
        land in the driver's trial folder, each rank's log as rank<R>.log there and in the trial's log, then the
        ranks' node-local folders are removed."""
        logs = []
        replies = ray.get([a.collect.remote() for _, a in ranks])
        for (rank, _), files in zip(ranks, replies):
            for name, text in files.items():
                if name.endswith(".log"):
                    logs.append(f"===== rank {rank} =====\n{text}")
                if name.endswith(".log") or not (handle.trial_dir / name).exists():
                    tmp = handle.trial_dir / f".{name}.tmp"
                    tmp.write_text(text)
                    os.replace(tmp, handle.trial_dir / name)
        handle.log_path.write_text("\n".join(logs))
        ray.get([a.cleanup.remote() for _, a in ranks])

    def _release(self, pg: Any, actors: list) -> None:
        if pg is None:
            return
        import ray
        from ray.util.placement_group import remove_placement_group

        for a in actors:
            try:
                ray.kill(a)
            except Exception:  # already dead
                pass
        try:
            remove_placement_group(pg)
        except Exception:  # Ray already shut down
            pass

    def close(self) -> None:
        with self._lock:
            handles = list(self._handles)
        for h in handles:
            h.cancel()
        if self._started_ray:
            import shutil

            import ray

            ray.shutdown()
            self._started_ray = False
            shutil.rmtree(self._temp_dir, ignore_errors=True)


def lost_ranks_error(infos: list[dict[str, Any]], alive: list[int], dead_nodes: set[str], error: Exception):
    """NodeLost naming the dead node(s), their ranks and Ray's own words; ActorLost when the nodes live on."""
    lost = [r for r in range(len(infos)) if r not in alive]
    cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    gone = sorted({infos[r]["ip"] for r in lost if infos[r]["node_id"] in dead_nodes})
    if gone:
        return NodeLost(f"node {', '.join(gone)} left the cluster mid-trial (ranks {lost} lost): {cause}")
    return ActorLost(f"the actors of ranks {lost} died, their nodes still in the cluster: {cause}")


def _ready(ray: Any, ref: Any, timeout_s: float) -> bool:
    done, _ = ray.wait([ref], timeout=timeout_s)
    return bool(done)


def _count(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"sweep.ray.{name}={value!r} must be null or an integer >= 1")
    return value


__all__ = ["ActorLost", "NodeLost", "PLACEMENT_FILE", "RayLauncher", "RayTrialHandle", "RankWorker", "ray_rank_envs"]
