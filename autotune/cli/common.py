"""Helpers shared by the subcommands: one-line argparse errors, typed flag parsers, JSON printing."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag prints one line (`autotune plan: error: --gpus='0' must be an integer >= 1`) and exits 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def fail(message: str) -> int:
    print(f"autotune: error: {message}", file=sys.stderr)
    return 2


def positive_int(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}={text!r} must be an integer >= 1") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag}={text!r} must be an integer >= 1")
        return value

    parse.__name__ = flag
    return parse


def positive_float(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}={text!r} must be a number > 0") from None
        if not value > 0 or math.isinf(value):
            raise argparse.ArgumentTypeError(f"{flag}={text!r} must be a number > 0")
        return value

    parse.__name__ = flag
    return parse


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="Hydra overrides, e.g. model=llama-3.1-8b cluster=h100-sxm-80gb plan.tp=2",
    )


def add_layout_command(
    subparsers: Any, name: str, *, help: str, description: str, json_help: str, run: Any
) -> argparse.ArgumentParser:
    """A command about ONE layout given by plan.* overrides (`estimate`, `probe-memory`): --gpus, --json, overrides."""
    p = subparsers.add_parser(name, help=help, description=description)
    p.add_argument(
        "--gpus",
        type=positive_int("--gpus"),
        default=None,
        help="world size (default: plan.dp*tp*pp*cp, dp=1 when plan.dp is null)",
    )
    p.add_argument("--json", action="store_true", help=json_help)
    add_overrides(p)
    p.set_defaults(run=run)
    return p


def print_json(obj: Any) -> None:
    """JSON with NaN/inf written as null (missing numbers are null, never NaN or -1)."""

    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if hasattr(x, "item") and not isinstance(x, (str, bytes)):
            return clean(x.item())
        return x

    print(json.dumps(clean(obj), indent=2, sort_keys=False))


def gib(n_bytes: float | None) -> str:
    return "-" if n_bytes is None or n_bytes != n_bytes else f"{n_bytes / 2**30:.2f} GiB"
