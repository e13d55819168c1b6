"""Launchers run one TrialSpec on N ranks somewhere and hand back one result row.

One interface (`Launcher.submit(spec) -> TrialHandle`; `handle.result(timeout)`, `handle.done()`, `handle.cancel()`,
`handle.status()`), mirroring concurrent.futures like submitit does. Implementations: local, slurm, ray, simulate, named
once in `LAUNCHERS`; `get_launcher(name, **options)` builds one without importing the others' heavy dependencies, and
every backend shares the trial protocol's plumbing from `launchers.protocol`.
"""

from launchers.base import LAUNCHERS, Launcher, TrialHandle, get_launcher, launcher_names

__all__ = ["LAUNCHERS", "Launcher", "TrialHandle", "get_launcher", "launcher_names"]
