"""The demo model's TTFT/TPOT through LatencyLab's harness next to a plain transformers
loop (prefill + greedy decode with the KV cache, timed by hand), same prompts, same
process, alternating. Also times the README's CLI command end to end.

    .venv/bin/python benchmarks/demo_latency.py [--prompt-tokens 128 --output-tokens 64 --repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def plain_loop(model, prompt: list[int], new_tokens: int) -> tuple[float, float]:
    """(TTFT s, mean TPOT s) of a hand-written greedy loop."""
    import torch
    from transformers import DynamicCache

    with torch.inference_mode():
        ids = torch.tensor([prompt])
        t0 = time.perf_counter()
        cache = DynamicCache()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        tok.item()
        t_first = time.perf_counter()
        for _ in range(new_tokens - 1):
            out = model(input_ids=tok, past_key_values=out.past_key_values, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tok.item()
        t_end = time.perf_counter()
    return t_first - t0, (t_end - t_first) / (new_tokens - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-cli", action="store_true")
    a = ap.parse_args()

    import torch

    from engine.backends.base import Request, get_backend
    from engine.backends.transformers.recipe import TransformersRecipe
    from engine.measure.metrics import tpot_ns, ttft_ns
    from engine.measure.records import RequestRecord
    from engine.run.sources.synthetic import synthetic_prompts
    from engine.spec import ModelSpec
    from engine.spec.sources.synthetic import SyntheticTraffic
    from engine.weights.models import resolve

    backend = get_backend("transformers")
    backend.load(resolve(ModelSpec(source="demo")), TransformersRecipe(), "cpu", lambda *_: None)
    model = backend._model
    prompts = synthetic_prompts(
        SyntheticTraffic(prompt_tokens=a.prompt_tokens), 0, a.repeats + 1, backend.tokenizer(), 49152
    )
    ours_ttft, ours_tpot, plain_ttft, plain_tpot = [], [], [], []
    plain_loop(model, prompts[0], 4)  # warm-up both paths
    backend.run(backend.stream([Request(prompts[0], 4)], [RequestRecord(0, 0, 0, 1)]))
    for prompt in prompts[1:]:
        rec = RequestRecord(0, 0, 0, len(prompt))
        backend.run(backend.stream([Request(prompt, a.output_tokens)], [rec]))
        ours_ttft.append(ttft_ns(rec) / 1e6)
        ours_tpot.append(tpot_ns(rec) / 1e6)
        t, p = plain_loop(model, prompt, a.output_tokens)
        plain_ttft.append(t * 1e3)
        plain_tpot.append(p * 1e3)
    med = statistics.median
    print(
        f"demo model, CPU ({torch.get_num_threads()} threads), batch 1, {a.prompt_tokens} prompt tokens, "
        f"{a.output_tokens} new tokens, {a.repeats} repeats (medians), load avg {os.getloadavg()[0]:.2f}"
    )
    print(f"{'':<26}{'TTFT ms':>10}{'TPOT ms':>10}")
    print(f"{'LatencyLab harness':<26}{med(ours_ttft):>10.1f}{med(ours_tpot):>10.2f}")
    print(f"{'plain transformers loop':<26}{med(plain_ttft):>10.1f}{med(plain_tpot):>10.2f}")
    print(
        f"{'ratio (ours / plain)':<26}{med(ours_ttft) / med(plain_ttft):>10.3f}{med(ours_tpot) / med(plain_tpot):>10.3f}"
    )
    backend.unload()

    if not a.skip_cli:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "engine",
                "run",
                "--model",
                "demo",
                "--engine",
                "transformers",
                "--prompt-tokens",
                "128",
                "--output-tokens",
                "32",
                "--requests",
                "8",
                "--batch-size",
                "4",
                "--db",
                f"sqlite:///{tmp}/bench.db",
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            print(
                f"\nREADME command (python -m engine run --model demo ... --requests 8 --batch-size 4): "
                f"{wall:.1f} s wall, exit {proc.returncode}"
            )
            print("\n".join(proc.stdout.splitlines()[:12]))


if __name__ == "__main__":
    main()
