"""Overhead of bench_model's training loop over a plain PyTorch loop: one CPU rank, same model
(bench_model.model.Llama), same shapes, same AdamW; prints JSON {"bench_step_s", "plain_step_s", "ratio", ...}.
Target ratio <= 1.10.

bench: bench_model.trainer.build_trainer on a gloo world of 1 (meta build + parallelize + seeded init, synthetic data
generated each step, loss bookkeeping) timing `trainer.step(t)`. plain: the model built directly on CPU, tokens drawn
once, `loss.backward(); opt.step(); opt.zero_grad()`. The two loops alternate step by step and the medians are
compared, so load from other processes on a shared box hits both alike.

    .venv/bin/python benchmarks/trainer_overhead.py [--steps 10] [--layers 8] [--batch 8] [--micro-batch 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _world_of_one() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(
        RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="global batch (sequences)")
    ap.add_argument("--micro-batch", type=int, default=2)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from bench_model.model import Llama
    from bench_model.trainer import ADAMW, build_trainer

    cfg = load_config(
        [
            "model=tiny",
            "train.precision=fp32",
            f"train.global_batch_size={args.batch}",
            f"plan.micro_batch_size={args.micro_batch}",
        ]
    )
    spec = make_spec(cfg, cfg.plan(1))
    ga, mbs, seq = spec.plan.grad_accum_steps, spec.plan.micro_batch_size, spec.train.seq_len
    _world_of_one()
    dist.init_process_group("gloo")
    trainer = build_trainer(spec, torch.device("cpu"))

    model = Llama(spec.model, seq)
    model.init_weights(spec.train.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, **ADAMW)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(spec.model.vocab_size, (ga, mbs, seq + 1), generator=gen)

    def plain_step() -> None:
        for m in range(ga):
            logits = model(tokens[m, :, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[m, :, 1:].flatten()) / ga
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    bench_s, plain_s = [], []
    for step in range(args.steps + 2):  # the first 2 of each are warm-up
        t0 = time.perf_counter()
        trainer.step(step)
        t1 = time.perf_counter()
        plain_step()
        t2 = time.perf_counter()
        if step >= 2:
            bench_s.append(t1 - t0)
            plain_s.append(t2 - t1)
    dist.destroy_process_group()
    b, p = statistics.median(bench_s), statistics.median(plain_s)
    out = {
        "bench_step_s": b,
        "plain_step_s": p,
        "ratio": b / p,
        "steps": args.steps,
        "model": "tiny",
        "global_batch_size": args.batch,
        "micro_batch_size": mbs,
        "seq_len": seq,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
