"""Launchers run one TrialSpec on N ranks somewhere and hand back one result row.

One interface (`Launcher.submit(spec) -> TrialHandle`; `handle.result(timeout)`, `handle.done()`, `handle.cancel()`,
`handle.status()`), mirroring concurrent.futures like submitit does. Implementations: local, simulate, slurm, ray;
`get_launcher(name, **options)` builds one without importing the others' heavy dependencies.
"""
from launchers.base import Launcher, TrialHandle, get_launcher

__all__ = ["Launcher", "TrialHandle", "get_launcher"]
