"""Verbs ``estimate`` (what-if on catalog or local hardware) and ``calibrate`` (measure
this machine's device with the micro-benchmark and store it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from engine.cli.common import UsageError, emit_json, int_arg, open_db
from engine.whatif.hardware import DEFAULT_COMPARISON, UnknownHardware, catalog, get_hardware

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jsonvalue import JSONMapping, JSONObject, JSONValue
    from engine.whatif.hardware import Hardware
    from engine.whatif.query import WhatIf
    from engine.whatif.recipe import EstimateRecipe, EstimateWorkload
    from engine.whatif.shapes import ModelShape

Question = tuple["ModelShape", "EstimateRecipe", "EstimateWorkload", list["Hardware"]]


def register(sub: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``estimate`` and ``calibrate`` verbs to ``python -m engine``."""
    from engine.whatif.roofline import ENGINES, IDEAL

    p = sub.add_parser(
        "estimate",
        parents=[common, as_json],
        help="predict TTFT/TPOT/throughput and memory fit on hardware you may not own",
    )
    p.add_argument("--model", help="demo | synthetic:<arch> | a local folder with config.json (required)")
    p.add_argument(
        "--hardware",
        default=None,
        help=f"comma-separated keys (default {','.join(DEFAULT_COMPARISON)} + measured local devices)",
    )
    p.add_argument("--engine", default=ENGINES[0], help=f"{' | '.join(ENGINES)} ({IDEAL}: bare roofline)")
    p.add_argument("--dtype", default="auto", help="weights: auto | fp32 | bf16 | fp16 | fp8 | int8 | int4")
    p.add_argument("--kv-dtype", default="auto", help="KV cache: auto | fp32 | bf16 | fp16 | fp8 | int8 | int4 | int2")
    p.add_argument("--batch-size", type=int_arg, default=1)
    p.add_argument("--tp", type=int_arg, default=1, help="tensor parallelism (GPUs per replica)")
    p.add_argument("--drop-layers", type=int_arg, default=0, help="decoder layers removed (pruning)")
    p.add_argument("--prompt-tokens", type=int_arg, default=128)
    p.add_argument("--output-tokens", type=int_arg, default=32)
    p.add_argument("--concurrency", type=int_arg, default=None, help="requests in flight (default: one batch)")
    p.add_argument("--list-hardware", action="store_true", help="print the hardware catalog and exit")
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser(
        "calibrate",
        parents=[common, as_json],
        help="measure this machine's device (copy bandwidth, matmul) and store it",
    )
    p.add_argument("--device", default="cpu", help="cpu | cuda:N")
    p.set_defaults(func=cmd_calibrate)


def _hardware_list(text: str | None, entries: dict[str, Hardware]) -> list[Hardware]:

    if text is None:
        keys = list(DEFAULT_COMPARISON) + sorted(k for k in entries if k.startswith("local:"))
    else:
        keys = [k.strip() for k in text.split(",") if k.strip()]
        if not keys:
            raise UsageError("--hardware is empty; give keys like h100-sxm,a100-80gb (see --list-hardware)")
    try:
        return [get_hardware(k, entries) for k in dict.fromkeys(keys)]
    except UnknownHardware as exc:
        raise UsageError(str(exc)) from exc


def _fmt(v: JSONValue, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def render(rows: Sequence[JSONMapping], compared: Sequence[JSONMapping] | None = None) -> str:
    """The estimate table as text (one line per hardware entry), each row's bound in words, where the priors come
    from, the calibration notes, and the rows of a recipe that is not overhead-bound (``compared``)."""
    head = (
        f"{'hardware':<14}{'fits':<5}{'mem GB':>9}{'weights':>9}{'KV GB':>8}{'TTFT ms':>10}{'TPOT ms':>10}"
        f"{'tok/s':>9}{'band ±%':>12}{'measured':>16}{'max bs':>8}{'max ctx':>9}  bound"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        band = "uncal." if r["band_ttft_pct"] is None else f"{r['band_ttft_pct']:.0f}/{r['band_tpot_pct']:.0f}"
        meas = "-" if r["measured_ttft_ms"] is None else f"{r['measured_ttft_ms']:.0f}/{r['measured_tpot_ms']:.1f}"
        lines.append(
            f"{r['hardware']:<14}{'yes' if r['fits'] else 'NO':<5}{_fmt(r['memory_gb']):>9}{_fmt(r['weights_gb']):>9}"
            f"{_fmt(r['kv_gb'], 2):>8}{_fmt(r['ttft_ms']):>10}{_fmt(r['tpot_ms'], 2):>10}"
            f"{_fmt(r['output_tokens_per_s']):>9}{band:>12}{meas:>16}{r['max_batch']:>8}{r['max_context']:>9}"
            f"  {r['bound']}"
        )
    lines.append("")
    lines.append("band: leave-one-out median error of TTFT/TPOT; measured: median TTFT/TPOT [ms] of matching runs")
    lines += _why_lines(rows)
    seen = set()
    for r in rows:
        priors = f"priors: {r['priors']}" if r.get("priors") and r["band_ttft_pct"] is None else None
        for note in (f"{r['hardware']}: {r['calibration']}", priors):
            if note and note.split(": ", 1)[1] not in seen:
                seen.add(note.split(": ", 1)[1])
                lines.append(note)
        if r["notes"]:
            lines.append(f"{r['hardware']}: {r['notes']}")
    return "\n".join(lines + _compared_lines(compared or []))


def _why_lines(rows: Sequence[JSONMapping], indent: str = "") -> list[str]:
    """What bounds the rows, each lesson once, then what each row's times are made of."""
    found = dict.fromkeys(lesson for r in rows for lesson in r.get("lessons") or [])
    lessons = sorted(found, key=lambda lesson: lesson.startswith("next"))  # the first token's, then the next tokens'

    lines = [f"{indent}why: {lesson}" for lesson in lessons]
    return lines + [f"{indent}  {r['hardware']}: {r['figures']}" for r in rows if r.get("figures") and r["fits"]]


def _compared_lines(compared: Sequence[JSONMapping]) -> list[str]:
    """The same question for a recipe that is not overhead-bound, one line per hardware entry, with its words."""
    if not compared:
        return []
    lines = ["", f"for comparison, {compared[0]['recipe']}:"]
    for r in compared:
        lines.append(
            f"  {r['hardware']:<14}TTFT {_fmt(r['ttft_ms']):>6} ms  TPOT {_fmt(r['tpot_ms'], 2):>6} ms  "
            f"{_fmt(r['output_tokens_per_s']):>7} tok/s  {r['bound']}"
        )
    notes = dict.fromkeys(r["notes"] for r in compared if r["notes"])
    return lines + _why_lines(compared, "  ") + [f"  note: {n}" for n in notes]


def _list_hardware(entries: dict[str, Hardware], as_json: bool) -> None:

    if as_json:
        emit_json([h.to_dict() for h in entries.values()])
        return
    for h in entries.values():
        print(
            f"{h.key:<14}{h.name:<40}{h.memory_gb:>7.0f} GB {h.bandwidth_gbs:>7.0f} GB/s  "
            f"bf16 {_fmt(h.tflops.get('bf16'))} TFLOP/s  source: {h.source}"
        )


def _question(args: argparse.Namespace, entries: dict[str, Hardware]) -> Question:
    """(shape, recipe, workload, hardware) from the arguments; UsageError for bad input."""
    from engine.whatif.estimate import ENGINES, EstimateError, EstimateRecipe, EstimateWorkload, model_shape

    if not args.model:
        raise UsageError("--model is required (demo, synthetic:<arch> or a local folder with config.json)")
    if args.engine not in ENGINES:
        raise UsageError(f"unknown engine {args.engine!r}; choose one of: {', '.join(ENGINES)}")
    try:
        shape = model_shape(args.model)
        recipe = EstimateRecipe(
            engine=args.engine,
            dtype=args.dtype,
            kv_dtype=args.kv_dtype,
            batch_size=args.batch_size,
            tp=args.tp,
            drop_layers=args.drop_layers,
        )
        shape.dropped(recipe.drop_layers)
        workload = EstimateWorkload(
            prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, concurrency=args.concurrency
        )
    except EstimateError as exc:
        raise UsageError(str(exc)) from exc
    return shape, recipe, workload, _hardware_list(args.hardware, entries)


def _payload(
    args: argparse.Namespace, shape: ModelShape, recipe: EstimateRecipe, workload: EstimateWorkload, result: WhatIf
) -> JSONObject:
    """The ``--json`` object: the question, one estimate per hardware entry, what was left out."""
    from engine.whatif.query import table_rows

    rows = table_rows(result)
    return {
        "model": args.model,
        "parameters": shape.params,
        "recipe": asdict(recipe),
        "workload": asdict(workload),
        "estimates": [
            dict(
                e.to_dict(),
                measured_runs=r["measured_runs"],
                measured_ttft_ms=r["measured_ttft_ms"],
                measured_tpot_ms=r["measured_tpot_ms"],
            )
            for e, r in zip(result.estimates, rows, strict=True)
        ],
        "why": [{"lessons": r["lessons"], "figures": r["figures"]} for r in rows],
        "priors": [r["priors"] for r in rows],
        "compared": [
            {"hardware": hw, "recipe": name, "lessons": why[0], "figures": why[1], **alt.to_dict()}
            for hw, name, alt, why in result.alternatives
        ],
        "calibrated": result.calibration.calibrated,
        "left_out": [{"run": rid, "reason": reason} for rid, reason in result.calibration.skipped],
        "left_out_summary": result.calibration.left_out,
    }


def cmd_estimate(args: argparse.Namespace) -> int:
    """Print calibrated estimates for one model/recipe/workload on several hardware entries."""
    from engine.whatif.estimate import EstimateError
    from engine.whatif.query import comparison_rows, table_rows, what_if

    db = open_db(args)
    entries = catalog(db)
    if args.list_hardware:
        _list_hardware(entries, args.json)
        return 0
    shape, recipe, workload, hardware = _question(args, entries)
    try:
        result = what_if(shape, args.model, hardware, recipe, workload, db=db)
    except EstimateError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        emit_json(_payload(args, shape, recipe, workload, result))
        return 0
    dropped = f", {recipe.drop_layers} layers dropped" if recipe.drop_layers else ""
    print(
        f"{args.model}: {shape.params / 1e9:.3f} B parameters, {recipe.engine}, batch {recipe.batch_size}, "
        f"tp {recipe.tp}{dropped}, {workload.prompt_tokens} prompt + {workload.output_tokens} output tokens"
    )
    print(render(table_rows(result), comparison_rows(result)))
    if result.calibration.left_out:
        print(result.calibration.left_out + " (python -m engine estimate --json lists them)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run the micro-benchmark on the local device, store it, and summarize the run-based fit."""
    from engine.whatif.calibrate import calibrate
    from engine.whatif.microbench import run_microbench, store

    db = open_db(args)
    device = args.device.strip().lower()
    try:
        result = run_microbench(device)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    mid = store(db, result)
    cal = calibrate(db)
    if args.json:
        emit_json(
            {
                "measurement_id": mid,
                **asdict(result),
                "groups": [
                    {
                        "engine": g.engine,
                        "device_kind": g.device_kind,
                        "dtype": g.dtype,
                        "factors": g.factors.to_dict(),
                        "runs": g.run_ids,
                        "band": None if g.band is None else asdict(g.band),
                    }
                    for g in cal.groups
                ],
                "skipped": cal.skipped,
            }
        )
        return 0
    for g in cal.groups:
        print(g.label, file=sys.stderr)
    if not cal.groups:
        print(
            "no usable runs yet: estimates stay uncalibrated (run: python -m engine run --model demo)", file=sys.stderr
        )
    mm = ", ".join(f"{k} {v * 1e3:.0f} GFLOP/s" for k, v in result.matmul_tflops.items())
    print(
        f"measured {device} ({result.device_name}): copy {result.copy_gbs:.1f} GB/s, matmul {mm} "
        f"in {result.duration_s:.1f} s; stored as measurement {mid}"
    )
    return 0
