"""issue 28 item 9: one module owns the trial protocol (launchers/protocol.py, both halves) and one `code_version`
format stamps every row. Before, bench_model/run.py + bench_model/metrics.py had their own `write_json_atomic`,
`run_protocol`, `exit_with`, `utc_now` and `code_version` (git describe: "bde0b7b") next to the launcher's
("0.1.0+gbde0b7b"), so ok rows and launcher-built rows disagreed in one column."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_NAMES = {"write_json_atomic", "run_protocol", "exit_with", "utc_now", "code_version", "as_memory_error",
                  "is_peer_lost", "is_oom", "die_with_parent", "assemble_row"}  # fmt: skip
# PEP 440: <version>+g<short sha>[.dirty], or the bare version outside git
CODE_VERSION = re.compile(r"^\d+\.\d+\.\d+(\.\w+)?(\+g[0-9a-f]{7,40}(\.dirty)?)?$")


def test_the_protocol_functions_are_defined_once():
    owners: dict[str, list[str]] = {}
    for pkg in ("autotune", "bench_model", "launchers"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef) and node.name in PROTOCOL_NAMES:
                    owners.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert owners == {name: ["launchers/protocol.py"] for name in PROTOCOL_NAMES}


def test_trainer_and_launcher_stamp_the_same_code_version():
    from bench_model import metrics
    from launchers import protocol

    assert metrics.code_version() == protocol.code_version()  # what bench_model/trial.py writes into an ok row
    assert CODE_VERSION.match(protocol.code_version()), protocol.code_version()
