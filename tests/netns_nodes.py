"""Virtual hosts on one machine for the multi-node engine tests: N network namespaces ("nodes"), each with its own
address on a private bridge, and with a hosts file naming every node — so SLURM's slurmd / Ray's raylets in them are
real processes on distinct addresses, and the traffic never leaves namespaces the test created (the brief's network
rule). Needs root (CI runs as root) and `ip` (iproute2).

Layout for prefix P, n nodes, subnet S (e.g. "10.201.0"):
    P-sw            a "switch" namespace holding bridge br0 (nothing listens there)
    P-n1 .. P-nN    node namespaces; eth0 = S.1 .. S.N/24, lo up; hostname-like names node1..nodeN
    /etc/netns/P-nK/hosts   `ip netns exec` bind-mounts it over /etc/hosts inside the namespace (ip-netns(8)), so
                    node1..nodeN resolve to their bridge addresses there and nowhere else

`down()` kills every process left in the namespaces (`ip netns pids`), deletes them and the hosts folders;
`leftovers(P)` names what is still there, for the no-leak assertions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NETNS_ETC = Path("/etc/netns")


@dataclass(frozen=True)
class VirtualNodes:
    prefix: str
    namespaces: tuple[str, ...]  # node namespaces, rank of node = index
    hostnames: tuple[str, ...]  # node1..nodeN (resolvable inside every node namespace)
    addrs: tuple[str, ...]  # their bridge addresses

    def argv(self, node: int, argv: Sequence[str]) -> list[str]:
        """`argv` run inside node `node`'s namespace (0-based)."""
        return ["ip", "netns", "exec", self.namespaces[node], *argv]

    def hosts_text(self) -> str:
        lines = ["127.0.0.1 localhost"] + [f"{a} {h}" for a, h in zip(self.addrs, self.hostnames, strict=True)]
        return "\n".join(lines) + "\n"


def _ip(*args: str, ns: str | None = None) -> None:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def up(prefix: str, n: int, subnet: str) -> VirtualNodes:
    """Create the switch and `n` node namespaces (see module doc). Partial state is torn down on failure."""
    if os.geteuid() != 0:
        raise PermissionError("virtual nodes need root (ip netns add); CI runs as root")
    nodes = VirtualNodes(
        prefix=prefix,
        namespaces=tuple(f"{prefix}-n{i + 1}" for i in range(n)),
        hostnames=tuple(f"node{i + 1}" for i in range(n)),
        addrs=tuple(f"{subnet}.{i + 1}" for i in range(n)),
    )
    sw = f"{prefix}-sw"
    try:
        _ip("netns", "add", sw)
        _ip("link", "add", "br0", "type", "bridge", ns=sw)
        _ip("link", "set", "br0", "up", ns=sw)
        for i, ns in enumerate(nodes.namespaces):
            _ip("netns", "add", ns)
            port = f"p{i + 1}"
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns, ns=sw)
            _ip("link", "set", port, "master", "br0", ns=sw)
            _ip("link", "set", port, "up", ns=sw)
            _ip("addr", "add", f"{nodes.addrs[i]}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(nodes.hosts_text())
    except BaseException:
        down(prefix)
        raise
    return nodes


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(f"{prefix}-")]


def pids_in(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p in out.split()]


def down(prefix: str, grace_s: float = 5.0) -> None:
    """SIGTERM then SIGKILL every process in the prefix's namespaces, then delete namespaces and hosts files."""
    namespaces = _namespaces(prefix)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for ns in namespaces for p in pids_in(ns)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline and any(pids_in(ns) for ns in namespaces):
            time.sleep(0.1)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    for etc in NETNS_ETC.glob(f"{prefix}-*"):
        shutil.rmtree(etc, ignore_errors=True)


def leftovers(prefix: str) -> list[str]:
    """Namespaces and hosts folders of this prefix still present (empty after a clean `down`)."""
    return _namespaces(prefix) + [str(p) for p in NETNS_ETC.glob(f"{prefix}-*")]


@contextlib.contextmanager
def virtual_nodes(prefix: str, n: int, subnet: str) -> Iterator[VirtualNodes]:
    down(prefix)  # a previous run killed before its teardown
    nodes = up(prefix, n, subnet)
    try:
        yield nodes
    finally:
        down(prefix)
