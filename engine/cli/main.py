"""``python -m engine <verb>``: the one command-line entry.

Every verb takes ``--db URL`` (env ``LATENCYLAB_DB_URL``) and ``--json`` where it
prints results. Bad input exits 2 with a one-line message on stderr; a run that fails
after it started is stored as failed and exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from engine.settings import database_url
from engine.spec import ENGINES, JobSpec, SpecError, parse_job_spec

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Modules that add verbs: each has ``register(subparsers, common)``.
VERB_MODULES: list[str] = [
    "engine.cli.knobs",
    "engine.cli.export",
    "engine.cli.jobs",
    "engine.cli.estimate",
    "engine.cli.sweep",
]


class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        raise UsageError(f"{self.prog}: {message}")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _common() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database URL (default: env LATENCYLAB_DB_URL, else data/latencylab.db)",
    )
    return common


def _json_flag() -> argparse.ArgumentParser:
    p = _Parser(add_help=False)
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    return p


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The options that describe a job (shared by run, submit and sweep)."""
    g = p.add_argument_group("job")
    g.add_argument("--spec", metavar="FILE", help="a JSON job spec; other options override its fields")
    g.add_argument("--model", help="demo | synthetic:<arch> | org/name | ./folder | file.gguf")
    g.add_argument("--engine", help=f"inference engine ({', '.join(ENGINES)})")
    g.add_argument("--dtype", help="auto | float32 | bfloat16 | float16")
    g.add_argument("--attn", dest="attn_implementation", help="auto | eager | sdpa | flash_attention_2")
    g.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any recipe knob, repeatable, e.g. --knob quantization=torchao_int8_weight_only "
        "--knob drop_layers=4 (list them: python -m engine knobs)",
    )
    g.add_argument("--device", help="cpu | cuda:N | cuda:N,M (default cpu)")
    g.add_argument("--name", help="a display name for the run")
    w = p.add_argument_group("workload")
    w.add_argument("--prompt-tokens", type=int, help="synthetic prompt length in tokens (default 128)")
    w.add_argument("--prompt-file", help="a text file, one prompt per line (or JSONL with 'prompt')")
    w.add_argument("--output-tokens", type=int, help="tokens generated per request (default 32)")
    w.add_argument("--requests", type=int, help="measured requests (default 8)")
    w.add_argument("--batch-size", type=int, help="static batch size (default 1)")
    w.add_argument("--warmup", dest="warmup_requests", type=int, help="warm-up requests, excluded (default 1)")
    w.add_argument("--seed", type=int, help="prompt seed (default 0)")
    w.add_argument("--stop-at-eos", action="store_true", help="let requests end at EOS (default: fixed length)")
    s = p.add_argument_group("serving load (engine/load.py; default: static batches)")
    s.add_argument("--arrival", help="batch | poisson | gamma | concurrency | max")
    s.add_argument("--rate", type=float, help="poisson/gamma: requests per second")
    s.add_argument("--burstiness", type=float, help="gamma shape: 1 = Poisson, < 1 burstier")
    s.add_argument("--max-concurrency", type=int, help="most requests in flight")
    s.add_argument("--prompt-length", help="fixed | uniform | normal (around --prompt-tokens)")
    s.add_argument("--prompt-length-spread", type=float, help="uniform/normal: relative spread, 0..1")
    for slo in ("ttft", "tpot", "e2el"):
        s.add_argument(f"--slo-{slo}-ms", type=float, help=f"goodput SLO on {slo.upper()} in ms")
    s.add_argument(
        "--max-error-rate", type=float, metavar="R", help="fail the run if more than this share (0..1) of requests fail"
    )
    e = p.add_argument_group("servers (engines vllm, vllm-server, openai)")
    e.add_argument("--base-url", help="openai: server base URL, e.g. http://127.0.0.1:8000/v1")
    e.add_argument("--served-model", dest="model_name", help="openai: the model name the server knows")
    e.add_argument("--endpoint", help="openai/vllm-server: completions | chat")
    e.add_argument("--api-key-env", help="openai: NAME of the environment variable holding the API key")
    e.add_argument("--max-num-seqs", type=int, help="vllm: most sequences batched per step")
    e.add_argument("--kv-cache-dtype", help="vllm: auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16")
    e.add_argument("--enable-prefix-caching", action="store_true", default=None, help="vllm: prefix caching on")
    q = p.add_argument_group("accuracy (an evaluating phase after the latency measurement)")
    q.add_argument(
        "--quality",
        metavar="LIST",
        help="comma-separated: ppl, fidelity, task:NAME (NAME: file.jsonl or an lm-eval task); none: off",
    )
    q.add_argument("--quality-tokens", type=int, metavar="N", help="corpus tokens scored (default 2048)")
    q.add_argument(
        "--quality-corpus", metavar="SRC", help="default | a text file | hf:<dataset>[:config[:split[:column]]]"
    )


def spec_from_args(args: argparse.Namespace) -> JobSpec:
    """Build and validate a JobSpec from parsed options; raises SpecError."""
    data: dict[str, Any] = {}
    if args.spec:
        try:
            with open(args.spec, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise SpecError(f"cannot read spec file {args.spec}: {exc}") from exc
        if not isinstance(data, dict):
            raise SpecError(f"spec file {args.spec} must hold a JSON object")
    model = dict(data.get("model") or {})
    recipe = dict(data.get("recipe") or {})
    workload = dict(data.get("workload") or {})
    if args.model is not None:
        model = {"source": args.model}
    if "source" not in model:
        raise SpecError("--model is required (demo, synthetic:<arch>, org/name, ./folder or file.gguf)")
    if args.engine is not None:
        if args.engine != recipe.get("engine", args.engine):
            recipe = {}
        recipe["engine"] = args.engine
    recipe.setdefault("engine", "transformers")
    for key in ("dtype", "attn_implementation"):
        if getattr(args, key, None) is not None:
            recipe[key] = getattr(args, key)
    for item in getattr(args, "knob", None) or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or name.strip() == "engine":
            raise SpecError(f"--knob {item!r} is not NAME=VALUE (list the knobs with: python -m engine knobs)")
        recipe[name.strip().replace("-", "_")] = _knob_value(value.strip())
    for key in ("output_tokens", "requests", "batch_size", "warmup_requests", "seed"):
        if getattr(args, key, None) is not None:
            workload[key] = getattr(args, key)
    for key in (
        "base_url",
        "model_name",
        "endpoint",
        "api_key_env",
        "max_num_seqs",
        "kv_cache_dtype",
        "enable_prefix_caching",
    ):
        if getattr(args, key, None) is not None:
            recipe[key] = getattr(args, key)
    for key in (
        "arrival",
        "rate",
        "burstiness",
        "max_concurrency",
        "prompt_length",
        "prompt_length_spread",
        "slo_ttft_ms",
        "slo_tpot_ms",
        "slo_e2el_ms",
        "max_error_rate",
    ):
        if getattr(args, key, None) is not None:
            workload[key] = getattr(args, key)
    if args.prompt_file is not None:
        workload["prompt_file"] = args.prompt_file
        workload["prompt_tokens"] = None
    if args.prompt_tokens is not None:
        workload["prompt_tokens"] = args.prompt_tokens
    if args.stop_at_eos:
        workload["ignore_eos"] = False
    if recipe["engine"] not in ENGINES:
        raise SpecError(f"unknown engine {recipe['engine']!r}; available: {', '.join(ENGINES)}")
    spec: dict[str, Any] = {"model": model, "recipe": recipe, "workload": workload}
    quality = dict(data.get("quality") or {})
    if getattr(args, "quality", None) is not None:
        quality["metrics"] = args.quality
    if getattr(args, "quality_tokens", None) is not None:
        quality["budget_tokens"] = args.quality_tokens
    if getattr(args, "quality_corpus", None) is not None:
        quality["corpus"] = args.quality_corpus
    if quality:
        spec["quality"] = quality
    for key in ("device", "name"):
        value = getattr(args, key, None) if getattr(args, key, None) is not None else data.get(key)
        if value is not None:
            spec[key] = value
    return parse_job_spec(spec)


def _knob_value(text: str) -> Any:
    """A knob value from the command line; the recipe's types validate it afterwards."""
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    return text


def open_db(args: argparse.Namespace) -> Any:
    from storage import StorageError, open_database

    try:
        return open_database(database_url(args.db))
    except StorageError as exc:
        raise UsageError(str(exc)) from exc


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


# -- verbs ----------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from engine.report.results import render_table, result_object
    from engine.run import runner
    from storage.runs import get_run

    spec = spec_from_args(args)
    runner.preflight(spec)
    db = open_db(args)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        result = runner.run_benchmark(spec, db=db, log=log)
    except runner.BenchmarkFailed as exc:
        print(f"run {exc.run_id} failed: {exc.reason}", file=sys.stderr)
        if args.json and exc.run_id is not None:
            _emit_json(result_object(get_run(db, exc.run_id)))
        return EXIT_FAILED
    obj = result_object(get_run(db, result.run_id))
    if args.json:
        _emit_json(obj)
    else:
        print(render_table(obj))
        print(f"\nstored as run {result.run_id}  (python -m engine show {result.run_id})")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from storage.runs import list_runs

    db = open_db(args)
    runs = list_runs(db, limit=args.limit)
    if args.json:
        _emit_json([_run_row(r) for r in runs])
        return EXIT_OK
    if not runs:
        print("no runs stored yet; try: python -m engine run --model demo")
        return EXIT_OK
    print(
        f"{'id':>5}  {'created (UTC)':<19}  {'status':<7}{'model':<32}{'engine':<14}{'device':<8}"
        f"{'TTFT p50':>10}{'TPOT p50':>10}{'tok/s':>9}"
    )
    for r in runs:
        row = _run_row(r)
        print(
            f"{r.id:>5}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.status:<7}{r.model[:31]:<32}{r.engine:<14}"
            f"{r.device:<8}{_num(row['ttft_p50_ms']):>10}{_num(row['tpot_p50_ms']):>10}"
            f"{_num(row['output_tokens_per_s'], 1):>9}"
        )
    return EXIT_OK


def _num(v: Any, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _run_row(r: Any) -> dict[str, Any]:
    m = r.metrics or {}
    return {
        "run_id": r.id,
        "created_at": r.created_at.isoformat(),
        "status": r.status,
        "name": r.name,
        "model": r.model,
        "engine": r.engine,
        "device": r.device,
        "ttft_p50_ms": (m.get("ttft_ms") or {}).get("p50"),
        "tpot_p50_ms": (m.get("tpot_ms") or {}).get("p50"),
        "output_tokens_per_s": m.get("output_tokens_per_s"),
        "error": r.error,
    }


def parse_run_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise UsageError(f"run id {text!r} is not a number; list runs with: python -m engine runs") from exc
    if value < 1:
        raise UsageError(f"run id {value} is not valid; run ids start at 1")
    return value


def cmd_show(args: argparse.Namespace) -> int:
    from engine.report.results import render_table, result_object
    from storage.runs import get_run

    db = open_db(args)
    run_id = parse_run_id(args.run_id)
    run = get_run(db, run_id)
    if run is None:
        raise UsageError(f"no run {run_id} in {db.url}; list runs with: python -m engine runs")
    obj = result_object(run)
    if args.json:
        _emit_json(obj)
    else:
        print(render_table(obj))
        print("\nspec: " + json.dumps(run.spec, sort_keys=True))
    return EXIT_OK


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert the demo model once (make run calls this) and prepare the database."""
    from engine.weights.models import demo_gguf_path, gguf_to_hf_folder

    open_db(args)
    folder = gguf_to_hf_folder(demo_gguf_path(), lambda msg, _f: print(msg, file=sys.stderr, flush=True))
    print(folder)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m engine", description="LatencyLab: benchmark LLM inference recipes")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    common, as_json = _common(), _json_flag()

    p = sub.add_parser("run", parents=[common, as_json], help="run one benchmark now and store it")
    add_spec_arguments(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", parents=[common, as_json], help="list stored runs")
    p.add_argument("--limit", type=positive_int, default=50)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", parents=[common, as_json], help="print one stored run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("prepare", parents=[common], help="convert the demo model and create the database")
    p.set_defaults(func=cmd_prepare)

    for module_name in VERB_MODULES:
        importlib.import_module(module_name).register(sub, common, as_json)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
