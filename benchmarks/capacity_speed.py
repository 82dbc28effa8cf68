"""How fast the capacity planner (``engine/whatif/capacity``) sizes 10 configurations, on this CPU.

The target (issue 32): a capacity search over 10 configurations in 2 minutes or less. The default plan is
what the What-if page's serving mode runs for two recipes (bf16, and an fp8 KV cache) on five catalog GPUs
at tensor parallel 1: Llama-3-8B (synthetic weights, vLLM), 512-token prompts and 128 output tokens at a peak
of 50 requests/s, TTFT p90 <= 500 ms and TPOT p90 <= 50 ms, 1,000 requests simulated per probe, with the
SLO chart's five scaled SLOs as the page computes them (``--no-curve``: the SLO alone, as the command line).
Uncalibrated (no database): a calibration is fitted once per plan before the search, and is not timed here.

    .venv/bin/python benchmarks/capacity_speed.py [--sample 1000] [--no-curve] [--rate 50]
        [--hardware h100-sxm,a100-80gb,l40s,l4,h200] [--model synthetic:llama-3-8b]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.spec import parse_job_spec
from engine.whatif.capacity.configs import prepared, variants_of
from engine.whatif.capacity.planner import CHART_SCALES, plan_capacity
from engine.whatif.capacity.slo import CapacitySLO
from engine.whatif.capacity.table import render_text
from engine.whatif.hardware import get_hardware
from engine.whatif.predict.calibration import uncalibrated

TARGET_S = 120.0
VARIANTS = ["bf16", "fp8kv:kv_cache_dtype=fp8"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="synthetic:llama-3-8b")
    p.add_argument("--hardware", default="h100-sxm,a100-80gb,l40s,l4,h200")
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--sample", type=int, default=1000)
    p.add_argument("--no-curve", action="store_true")
    args = p.parse_args()
    t0 = time.perf_counter()
    workload = {"prompt_tokens": 512, "output_tokens": 128, "arrival": "poisson", "rate": args.rate}
    workload.update(requests=args.sample, warmup_requests=0)
    spec = parse_job_spec(
        {
            "model": {"source": args.model},
            "recipe": {"engine": "vllm"},
            "device": "cuda:0",
            "workload": workload,
            "quality": {"metrics": []},
        }
    )
    hardware = [get_hardware(k) for k in args.hardware.split(",")]
    ready = prepared(spec, variants_of(VARIANTS), hardware, [1], uncalibrated, sample=args.sample)
    t_prep = time.perf_counter() - t0
    slo = CapacitySLO(ttft_ms=500, tpot_ms=50)
    scales = () if args.no_curve else CHART_SCALES
    plan = plan_capacity(ready.configs, ready.traffic, slo, scales=scales, progress=print)
    total = time.perf_counter() - t0
    probes = sum(len(c.probes) for c in plan.capacities)
    print()
    print(render_text(plan, spec.workload.traffic.words()))
    print()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{len(ready.configs)} configurations, {probes} probes of {args.sample} requests, "
        f"{'SLO only' if args.no_curve else f'SLO and {len(CHART_SCALES) - 1} scaled SLOs'}: "
        f"planned in {t_prep:.1f} s, sized in {plan.wall_s:.1f} s, {total:.1f} s in all "
        f"(target {TARGET_S:.0f} s: {'met' if total <= TARGET_S else 'missed'}); load average {load}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
