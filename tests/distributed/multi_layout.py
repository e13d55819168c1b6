"""Run several TrialSpecs of the same world size one after another inside ONE torchrun launch (process start and
imports dominate the cost on a 2-core box). Each layout re-creates its DeviceMesh on the shared default process group.

    torchrun --nproc-per-node N tests/distributed/multi_layout.py OUTDIR SPEC.json [SPEC.json ...]

Rank 0 writes OUTDIR/<spec stem>.result.json per layout; any failure writes the trial-protocol err file and exits."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    from autotune.core.trial import TrialSpec
    from bench_model.trial import run_trial
    from launchers.protocol import as_memory_error, write_json_atomic

    outdir, specs = Path(argv[0]), [Path(a) for a in argv[1:]]
    _measure_peak_flops_once_per_dtype()
    rank = int(os.environ["RANK"])
    for path in specs:
        out = outdir / f"{path.stem}.result.json"
        try:
            row = run_trial(TrialSpec.from_json(path.read_text()))
            if rank == 0:
                write_json_atomic(out, row)
        except BaseException as e:  # noqa: BLE001
            traceback.print_exc()
            exc = as_memory_error(e)
            write_json_atomic(
                out.with_name(f"{out.name}.rank{rank}.err.json"),
                {"rank": rank, "status": "crash", "error_type": type(exc).__name__, "error_message": str(exc)[:2000]},
            )
            sys.stderr.flush()
            os._exit(1)
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    return 0


def _measure_peak_flops_once_per_dtype() -> None:
    """Every trial measures this rank's matmul FLOP/s for its MFU (eleven 512^3 GEMMs, ~1-3 s per rank on a loaded
    2-core box); the layouts of one launch share the processes and the CPU, so the first measurement per compute dtype
    stands for the rest. Every rank runs the same layouts in the same order, so all ranks still measure together."""
    import functools

    from bench_model import metrics

    metrics.measured_matmul_peak_flops = functools.cache(metrics.measured_matmul_peak_flops)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
