"""`autotune` console script: a thin dispatcher. Each subcommand lives in its own module exposing
`add_parser(subparsers)` and `run(args) -> int`; modules import nothing heavy at top level so `autotune plan` starts fast."""

from __future__ import annotations

import importlib
import sys

from autotune.cli.common import OneLineParser, fail
from autotune.core.errors import AutotuneError

# subcommand -> module (autotune.cli.<module>)
COMMANDS: dict[str, str] = {
    "plan": "plan",
    "estimate": "estimate",
    "bench": "bench",
    "probe-memory": "probe_memory",
    "sweep": "sweep",
    "report": "report",
    "export": "export",
    "submit": "submit",
    "calibrate": "calibrate",
    "netbench": "netbench",
    "devbench": "devbench",
}


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="autotune", description="Parallelism autotuner for LLM training.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, module in COMMANDS.items():
        # every command ships with the package: a missing module is a packaging bug, so its ImportError surfaces
        importlib.import_module(f"autotune.cli.{module}").add_parser(sub, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # Overrides (key=value) may come anywhere, also after flags: `autotune sweep --gpus 2 experiment=demo --max-trials 4
    # sweep.warmup_steps=1`. argparse stops collecting a positional list at the first flag, so gather the rest here.
    args, extra = parser.parse_known_args(argv)
    stray = [t for t in extra if t.startswith("-") or "=" not in t]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = list(args.overrides or []) + extra
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return 130
    except AutotuneError as e:  # a user mistake (ConfigError, SpecError, ...): one line, exit 2. Any other
        return fail(str(e))  # ValueError is a bug in autotune or a library and keeps its traceback.
    except FileNotFoundError as e:
        return fail(f"{e.filename}: no such file or directory")
    except PermissionError as e:
        return fail(f"{e.filename}: permission denied")
    except (FileExistsError, NotADirectoryError) as e:  # mkdir(parents=True) met a file where a folder belongs
        return fail(f"{e.filename}: must be a folder, but a file of that name exists ({e.strerror})")
    except OSError as e:  # a directory where a file belongs, a full disk: one line
        return fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e).splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
