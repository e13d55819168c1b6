"""`autotune plan --gpus N [overrides] [--top K] [-o FILE.parquet|FILE.csv] [--json]`: every layout of N GPUs, ranked."""

from __future__ import annotations

import argparse

from autotune.cli.accuracy import accuracy_note
from autotune.cli.common import add_overrides, positive_int, print_json
from autotune.core.errors import UsageError
from autotune.core.labels import layout_label
from autotune.core.types import OPT_IN_FIELDS


def add_parser(subparsers, name: str) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        name,
        help="rank every parallel layout of N GPUs (memory + predicted speed)",
        description="Enumerate every dp*tp*pp*cp layout of N GPUs, reject impossible ones with a "
        "reason, estimate memory and speed, print the best.",
    )
    p.add_argument("--gpus", type=positive_int("--gpus"), required=True, help="number of GPUs (world size)")
    p.add_argument("--top", type=positive_int("--top"), default=10, help="rows to print (default 10)")
    p.add_argument("-o", "--output", metavar="FILE", help="write EVERY candidate to FILE (.parquet or .csv)")
    p.add_argument("--json", action="store_true", help="print the top rows and the summary as JSON")
    add_overrides(p)
    p.set_defaults(run=run)
    return p


def margin_label(row) -> str:
    """Usable memory left above the predicted reserved peak: GiB and sigmas of the reserved model's error."""
    return f"{row['mem_margin_bytes'] / 2**30:.1f} ({row['mem_margin_sigma']:.1f}σ)"


def summary(df) -> dict[str, int]:
    from autotune.layouts.rules import MEMORY_RULE

    over = int((df["reject_rule"] == MEMORY_RULE).sum())
    invalid = int(df["reject_rule"].notna().sum()) - over
    return {"enumerated": len(df), "invalid": invalid, "over_memory": over, "fitting": int(df["rank"].notna().sum())}


def _check_output(path: str) -> None:
    if not path.endswith((".parquet", ".csv")):
        raise UsageError(f"-o {path!r}: file name must end in .parquet or .csv")


def run(args) -> int:
    from autotune.layouts.planner import enumerate_candidates, top_candidates
    from autotune.layouts.variants import best_by_variant

    if args.output:
        _check_output(args.output)
    from autotune.cli.keys import load_config_for

    cfg = load_config_for("plan", args.overrides)
    df = enumerate_candidates(cfg, args.gpus)
    if args.output:
        _write(df, args.output)
    counts = summary(df)
    top = top_candidates(df, cfg, args.gpus, args.top)
    variants = best_by_variant(df, cfg, VARIANT_FIELDS)
    if args.json:
        rows = top.astype(object).where(top.notna(), None).to_dict(orient="records")
        print_json(
            {
                "model": cfg.model.name,
                "cluster": cfg.cluster.name,
                "num_gpus": args.gpus,
                **counts,
                "top": rows,
                "best_by_variant": variants,
                "output": args.output,
            }
        )
        return 0
    args._frame = df
    _print_table(top, cfg, args, counts)
    if variants:
        _print_variants(variants)
    return 0


# Dimensions searched only when asked (they change the job): when the space lists more than one value of one, the
# best fitting layout of each value is shown with the terms the option adds, so a slower option is still visible.
VARIANT_FIELDS = OPT_IN_FIELDS


def _print_variants(variants: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="best fitting layout per searched option value (seconds per step)", title_justify="left")
    cols = ("option", "rank", "layout", "GiB/GPU", "host GiB", "tok/s/GPU", "optimizer s", "dp comm s", "replicate s")
    for col in cols:
        table.add_column(col, justify="left" if col in ("option", "layout") else "right", no_wrap=True)
    for v in variants:
        name = f"{v['field']}={v['value']}"
        if "rank" not in v:
            table.add_row(name, "-", f"none of {v['enumerated']} fits (mostly {v['most_common_reject_rule']})")
            continue
        table.add_row(
            name,
            str(v["rank"]),
            v["layout"],
            f"{v['mem_reserved_bytes'] / 2**30:.1f}",
            f"{v['mem_host_bytes'] / 2**30:.1f}",
            f"{v['pred_tokens_per_s_per_gpu']:,.0f}",
            f"{v['optimizer_s']:.2f}",
            f"{v['dp_comm_s']:.2f}",
            f"{v['dp_replicate_comm_s']:.2f}",
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(table)


def _write(df, path: str) -> None:
    if path.endswith(".csv"):
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)


def _print_table(top, cfg, args, counts) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{cfg.model.name} on {args.gpus} x {cfg.cluster.name} · seq {cfg.train.seq_len} · "
        f"global batch {cfg.train.global_batch_size} seq",
        title_justify="left",
    )
    host = bool((top["mem_host_bytes"] > 0).any())  # a host-memory column when a listed layout offloads
    cols = ("rank", "layout", "GiB/GPU", *(("host GiB",) if host else ()), "margin GiB (σ)", "tok/s/GPU", "MFU %")
    for col in (*cols, "step s", "candidate"):
        table.add_column(col, justify="left" if col in ("layout", "candidate") else "right", no_wrap=True)
    for _, r in top.iterrows():
        table.add_row(
            str(r["rank"]),
            layout_label(r),
            f"{r['mem_reserved_bytes'] / 2**30:.1f}",
            *((f"{r['mem_host_bytes'] / 2**30:.1f}",) if host else ()),
            margin_label(r),
            f"{r['pred_tokens_per_s_per_gpu']:,.0f}",
            f"{100 * r['pred_mfu']:.1f}",
            f"{r['pred_step_s']:.2f}",
            r["candidate_id"],
        )
    console = Console()
    if not console.is_terminal:  # pipes and CI logs: do not squeeze the table into 80 columns
        console = Console(width=160)
    console.print(table)
    line = (
        f"enumerated {counts['enumerated']} layouts · invalid {counts['invalid']} · over memory "
        f"{counts['over_memory']} · fitting {counts['fitting']}"
    )
    if args.output:
        line += f" · all {counts['enumerated']} written to {args.output}"
    console.print(line, highlight=False)
    for n, rule, example in common_rejections(args._frame):
        console.print(f"  {n:>6} rejected by {rule}, e.g. {example}", highlight=False, soft_wrap=True)
    console.print(accuracy_note(cfg.cluster.name, cfg.model.is_moe), highlight=False, soft_wrap=True)
    if assumed_cluster(args.overrides, cfg):
        console.print(
            f"cluster: {cfg.cluster.name} (the default preset, assumed because no cluster= was given; "
            "pass e.g. cluster=h100-sxm-80gb)",
            highlight=False,
            soft_wrap=True,
        )


def common_rejections(df, k: int = 5) -> list[tuple[int, str, str]]:
    """The `k` most common reject rules: (count, rule id, the reason of the first row it rejected)."""
    rejected = df[df["reject_rule"].notna()]
    if rejected.empty:
        return []
    counts = rejected["reject_rule"].value_counts()
    first = rejected.drop_duplicates("reject_rule").set_index("reject_rule")["reject_reason"]
    return [(int(n), str(rule), str(first[rule])) for rule, n in counts.head(k).items()]


def assumed_cluster(overrides, cfg) -> bool:
    """True when the cluster is the `cpu` default only because the user named none (nor an experiment that does)."""
    keys = {o.lstrip("+~").partition("=")[0] for o in overrides}
    return cfg.cluster.name == "cpu" and "cluster" not in keys and "experiment" not in keys
