"""Which live processes still belong to a trial: every rank's command line holds the trial's work dir / SPEC path, so
a test that ends with `processes_mentioning(trial_dir) == []` proves nothing of the trial is left running."""

from __future__ import annotations

import os


def processes_mentioning(text: str) -> list[str]:
    """`pid: command line` of every live process (but this one) whose command line contains `text`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # exited meanwhile
            continue
        if text in cmd:
            found.append(f"{entry.name}: {cmd[:200]}")
    return found
