"""What every verb of ``python -m engine`` shares: exit codes, the one-line usage error, the
parent parsers (``--db``, ``--json``), the job options and the spec built from them, the
database, and ``--json`` output (one JSON document on stdout, everything else on stderr)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn, TypeAlias, TypeVar

from engine.cli.traffic import add_traffic_arguments, traffic_from_args
from engine.cli.values import finite_float, int_arg, positive_int, read_spec_file, spec_section, whole_number
from engine.settings import database_url
from engine.spec import JobSpec, SpecError, engines, parse_job_spec
from engine.spec.text import knob_value

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from storage import Database

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# What a verb module's ``register(subparsers, common, as_json)`` adds its verbs to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
_T = TypeVar("_T")


class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and exit 2 (via :class:`UsageError`)."""

    def error(self, message: str) -> NoReturn:  # argparse would print the usage too
        raise UsageError(f"{self.prog}: {message}")


def short_usage(parser: argparse.ArgumentParser) -> str:
    """What ``python -m engine`` alone prints: the verbs in a few lines, and where each verb's options are."""
    verbs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
    names = ", ".join(verbs)
    return (
        f"usage: {parser.prog} VERB [options]   (a verb is needed)\n"
        f"verbs: {names}\n"
        f"start with: {parser.prog} run --model demo   ·   a verb's options: {parser.prog} VERB --help"
    )


def parse_id(text: str, what: str, hint: str) -> int:
    """A run or job id from the command line; UsageError with one line (and ``hint``) when it is not one."""
    try:
        return whole_number(text, low=1)
    except ValueError as exc:
        raise UsageError(f"{what} {exc}; {hint}") from exc


def common_parent() -> argparse.ArgumentParser:
    """The ``--db`` and ``--verbose`` options every verb takes."""
    common = Parser(add_help=False)
    common.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database URL (default: env LATENCYLAB_DB_URL, else data/latencylab.db)",
    )
    common.add_argument("--verbose", action="store_true", help="print tracebacks of failures on stderr")
    return common


def json_parent() -> argparse.ArgumentParser:
    """The ``--json`` option of the verbs that print results."""
    p = Parser(add_help=False)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (logs go to stderr)")
    return p


def open_db(args: argparse.Namespace) -> Database:
    """The database of ``--db`` (or the environment's); UsageError with one line when it cannot open."""
    from storage import StorageError, open_database

    try:
        return open_database(database_url(args.db))
    except StorageError as exc:
        raise UsageError(str(exc)) from exc


# -- --json: one document on stdout ------------------------------------------------------------
_pending_json: list[str] | None = None  # documents held back while stdout points at stderr


def emit_json(obj: object) -> None:
    """Print ``obj`` as JSON on stdout (in ``--json`` mode, once the verb is over: see :func:`json_stdout`)."""
    text = json.dumps(obj, indent=2, default=str) + "\n"
    if _pending_json is not None:
        _pending_json.append(text)
    else:
        sys.stdout.write(text)


@contextmanager
def json_stdout() -> Iterator[None]:
    """For the duration of a ``--json`` verb, send everything written to stdout to stderr.

    File descriptor 1 is pointed at stderr (so libraries writing to it, vLLM's loggers and
    the child processes a run starts, which inherit it, all land on stderr) and so is
    ``sys.stdout``; :func:`emit_json` holds its document back. Afterwards stdout is put
    back and receives the document(s) alone.
    """
    global _pending_json
    sys.stdout.flush()
    saved_fd, saved_stdout = os.dup(1), sys.stdout
    os.dup2(2, 1)
    sys.stdout, _pending_json = sys.stderr, []
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        sys.stdout, pending, _pending_json = saved_stdout, _pending_json, None
        for text in pending:
            sys.stdout.write(text)
        sys.stdout.flush()


def listed_as_json_or_empty(
    args: argparse.Namespace, items: Sequence[_T], as_row: Callable[[_T], JSONObject], empty_hint: str
) -> bool:
    """For listing verbs: print the items as JSON (``--json``) or the hint when there are none;
    True when that was the whole answer, False when the caller prints its table."""
    if args.json:
        emit_json([as_row(item) for item in items])
        return True
    if not items:
        print(empty_hint)
        return True
    return False


# -- the options that describe a job -----------------------------------------------------------
def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The options that describe a job (shared by run, submit and sweep)."""
    g = p.add_argument_group("job")
    g.add_argument("--spec", metavar="FILE", help="a JSON job spec; other options override its fields")
    g.add_argument("--model", help="demo | synthetic:<arch> | org/name | ./folder | file.gguf")
    g.add_argument(
        "--engine", help=f"inference engine ({', '.join(engines.names())}; default {engines.default().name})"
    )
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
    w.add_argument("--output-tokens", type=int_arg, help="tokens generated per request (default 32)")
    w.add_argument("--requests", type=int_arg, help="measured requests (default 8)")
    w.add_argument("--batch-size", type=int_arg, help="static batch size (default 1)")
    w.add_argument("--warmup", dest="warmup_requests", type=int_arg, help="warm-up requests, excluded (default 1)")
    w.add_argument("--seed", type=int_arg, help="prompt seed (default 0)")
    w.add_argument("--stop-at-eos", action="store_true", help="let requests end at EOS (default: fixed length)")
    w.add_argument(
        "--profile-steps",
        type=int_arg,
        metavar="N",
        help=f"then profile N decode steps ({', '.join(engines.with_capability('profiles'))})",
    )
    _add_serving_arguments(p)
    add_traffic_arguments(p)
    _add_repeat_arguments(p)
    e = p.add_argument_group(f"servers (engines {', '.join(engines.with_capability('serving'))})")
    e.add_argument("--base-url", help="openai: server base URL, e.g. http://127.0.0.1:8000/v1")
    e.add_argument("--served-model", dest="model_name", help="openai: the model name the server knows")
    e.add_argument("--endpoint", help="openai/vllm-server: completions | chat")
    e.add_argument("--api-key-env", help="openai: NAME of the environment variable holding the API key")
    e.add_argument("--max-model-len", type=positive_int, metavar="N", help="openai/vllm: the server's context (tokens)")
    e.add_argument("--max-num-seqs", type=int_arg, help="vllm: most sequences batched per step")
    e.add_argument("--kv-cache-dtype", help="vllm: auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16")
    e.add_argument("--enable-prefix-caching", action="store_true", default=None, help="vllm: prefix caching on")
    q = p.add_argument_group("accuracy (an evaluating phase after the latency measurement)")
    q.add_argument(
        "--accuracy",
        "--quality",
        dest="quality",
        metavar="LIST",
        help="comma-separated: ppl, fidelity, task:NAME (NAME: file.jsonl or an lm-eval task); none: off",
    )
    q.add_argument("--quality-tokens", type=int_arg, metavar="N", help="corpus tokens scored (default 2048)")
    q.add_argument(
        "--quality-corpus", metavar="SRC", help="default | a text file | hf:<dataset>[:config[:split[:column]]]"
    )


def _add_serving_arguments(p: argparse.ArgumentParser) -> None:
    """Arrival process, prompt lengths, SLOs and the error budget of a serving load."""
    s = p.add_argument_group("serving load (engine/run/driver.py; default: static batches)")
    s.add_argument("--arrival", help="batch | poisson | gamma | concurrency | max")
    s.add_argument("--rate", type=finite_float, help="poisson/gamma: requests per second")
    s.add_argument("--burstiness", type=finite_float, help="gamma shape: 1 = Poisson, < 1 burstier")
    s.add_argument("--max-concurrency", type=int_arg, help="most requests in flight")
    s.add_argument(
        "--client-processes",
        type=positive_int,
        metavar="N",
        help="client processes sending the requests, each with its own event loop (default: chosen from the cores "
        f"and the concurrency; engines {', '.join(engines.with_capability('client_processes'))})",
    )
    s.add_argument(
        "--load-nodes",
        type=positive_int,
        metavar="K",
        help="run the client processes as Ray actors on K nodes of the Ray cluster, one scheduler for all "
        "(engine openai; the job runs with `worker --executor ray` or LATENCYLAB_RAY_ADDRESS set)",
    )
    for slo in ("ttft", "tpot", "e2el"):
        s.add_argument(f"--slo-{slo}-ms", type=finite_float, help=f"goodput SLO on {slo.upper()} in ms")
    s.add_argument(
        "--max-error-rate",
        type=finite_float,
        metavar="R",
        help="fail the run if more than this share (0..1) of requests fail",
    )


def _add_repeat_arguments(p: argparse.ArgumentParser) -> None:
    """``--preset``, ``--trials`` and adaptive stopping (``--until-ci`` and its limits)."""
    t = p.add_argument_group("trials and adaptive stopping (engine/run/repeats.py)")
    t.add_argument(
        "--preset",
        choices=("quick", "decision"),
        help="quick: one trial; decision: 3+ trials, then rounds until TPOT p50 is within +-2 %% "
        "(at most 1000 requests / 600 s); other options override it",
    )
    t.add_argument(
        "--repeats",
        "--trials",
        dest="trials",
        type=positive_int,
        help="repeats: measured phases of --requests requests each (default 1; --trials is the older name)",
    )
    t.add_argument(
        "--until-ci",
        dest="until_ci_pct",
        type=float,
        metavar="PCT",
        help="measure in rounds until the 95 %% CI half-width of --until-metric is <= PCT %%",
    )
    t.add_argument(
        "--until-metric",
        type=metric_key,
        help="the figure --until-ci watches (default tpot_ms_p50; also ttft_ms_p90, itl_ms_p50 ...)",
    )
    t.add_argument("--max-requests", type=positive_int, help="--until-ci: most measured requests (default 1000)")
    t.add_argument("--max-seconds", type=float, help="--until-ci: most seconds of measuring")
    t.add_argument("--soak-minutes", type=float, help="a soak: repeat rounds of --requests for this many minutes")


_SERVER_OPTIONS = (  # applied after --knob, as before
    "base_url",
    "model_name",
    "endpoint",
    "api_key_env",
    "max_model_len",
    "max_num_seqs",
    "kv_cache_dtype",
    "enable_prefix_caching",
)
_WORKLOAD_OPTIONS = (
    "profile_steps",
    "client_processes",
    "load_nodes",
    "output_tokens",
    "requests",
    "batch_size",
    "warmup_requests",
    "seed",
    "arrival",
    "rate",
    "burstiness",
    "max_concurrency",
    "slo_ttft_ms",
    "slo_tpot_ms",
    "slo_e2el_ms",
    "max_error_rate",
    "trials",
    "until_ci_pct",
    "until_metric",
    "max_requests",
    "max_seconds",
    "soak_minutes",
)


def metric_key(text: str) -> str:
    """A metric named on the command line, in any spelling the registry reads (``tpot_ms.p50``), as its key."""
    from engine.measure.registry import canonical

    return canonical(text)


def _recipe_from_args(args: argparse.Namespace, recipe: JSONObject) -> JSONObject:
    if args.engine is not None:
        if args.engine != recipe.get("engine", args.engine):
            recipe = {}
        recipe["engine"] = args.engine
    recipe.setdefault("engine", engines.default().name)
    recipe.update({k: getattr(args, k) for k in ("dtype", "attn_implementation") if getattr(args, k, None) is not None})
    for item in getattr(args, "knob", None) or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or name.strip() == "engine":
            raise SpecError(f"--knob {item!r} is not NAME=VALUE (list the knobs with: python -m engine knobs)")
        recipe[name.strip().replace("-", "_")] = knob_value(value.strip())
    recipe.update({k: getattr(args, k) for k in _SERVER_OPTIONS if getattr(args, k, None) is not None})
    engines.get(recipe["engine"])  # SpecError naming the registered engines
    return recipe


def _workload_from_args(args: argparse.Namespace, workload: JSONObject) -> JSONObject:
    if getattr(args, "preset", None):
        from engine.spec.workload import apply_preset

        workload = apply_preset(workload, args.preset)
    workload.update({k: getattr(args, k) for k in _WORKLOAD_OPTIONS if getattr(args, k, None) is not None})
    if args.stop_at_eos:
        workload["ignore_eos"] = False
    return traffic_from_args(args, workload)


def _quality_from_args(args: argparse.Namespace, quality: JSONObject) -> JSONObject:
    for option, key in (("quality", "metrics"), ("quality_tokens", "budget_tokens"), ("quality_corpus", "corpus")):
        if getattr(args, option, None) is not None:
            quality[key] = getattr(args, option)
    return quality


def spec_from_args(args: argparse.Namespace) -> JobSpec:
    """Build and validate a JobSpec from parsed options (over ``--spec``'s fields); raises SpecError.

    Every key of the spec file is kept (options override them), so a misspelled one, e.g.
    ``"worklaod"``, is rejected by the spec like a misspelled nested field.
    """
    data = read_spec_file(args.spec)
    if args.model is not None:
        model: JSONObject = {"source": args.model}
    else:
        model = spec_section(data, "model", '{"source": "demo"}')
    if "source" not in model:
        raise SpecError("--model is required (demo, synthetic:<arch>, org/name, ./folder or file.gguf)")
    spec: JSONObject = dict(data)
    spec.update(
        model=model,
        recipe=_recipe_from_args(args, spec_section(data, "recipe", f'{{"engine": "{engines.default().name}"}}')),
        workload=_workload_from_args(args, spec_section(data, "workload", '{"requests": 8}')),
    )
    quality = _quality_from_args(args, spec_section(data, "quality", '{"metrics": ["ppl"]}'))
    spec.pop("quality", None)
    if quality:
        spec["quality"] = quality
    for key in ("device", "name"):
        if getattr(args, key, None) is not None:
            spec[key] = getattr(args, key)
        elif spec.get(key) is None:
            spec.pop(key, None)
    return parse_job_spec(spec)


def stderr_log(msg: str) -> None:
    """The progress log of a verb: one line on stderr."""
    print(msg, file=sys.stderr, flush=True)
