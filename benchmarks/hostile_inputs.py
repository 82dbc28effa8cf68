"""Hostile traffic inputs through every way in (issue 33): each must be refused in one line, exit 2, with nothing
stored or queued, before any model loads, and the same answer from ``run``, ``submit``, ``sweep`` and Launch.

    .venv/bin/python benchmarks/hostile_inputs.py [--only NAME,...] [--keep DIR]

Each input is a small generated file (or an option) given to ``python -m engine run``, ``submit`` and ``sweep``
as a user would type them (a subprocess each, a fresh database), and to Launch's own check
(``engine.jobs.submission.check_submittable``, what views/launch.py calls before it enables Submit). Printed: a
markdown table with, per way in, "ok" (one line, exit 2, nothing stored) or what went wrong, and the seconds
``run`` took to refuse (the interpreter's start included).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _mooncake(folder: Path, name: str, rows: list[dict | str]) -> str:
    path = folder / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return str(path)


def _rows(n: int, gap_ms: float = 100, tokens: int = 300) -> list[dict | str]:
    return [
        {"timestamp": gap_ms * i, "input_length": tokens, "output_length": 8, "hash_ids": [i % 4]} for i in range(n)
    ]


def _dataset(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def _inputs(folder: Path) -> dict[str, list[str]]:
    """name -> the options a user would type (model and engine added by the caller)."""
    back = _rows(200)
    back[150] = {**back[150], "timestamp": 1}  # type: ignore[dict-item]
    late = _rows(150)
    late[120] = '{"timestamp": 1, "input_length": 5'
    gap = _rows(3)
    gap[2] = {**gap[2], "timestamp": 2 * 3600 * 1000}  # type: ignore[dict-item]
    nanos = [{**r, "timestamp": int(r["timestamp"]) * 1_000_000} for r in _rows(20)]  # type: ignore[index]
    skipped = [{**r, "input_length": 0} for r in _rows(10)]  # type: ignore[dict-item]
    convs = [{"conversations": [{"from": "gpt", "value": "an answer with no question"}]}]
    null = [{"conversations": [{"from": "human", "value": None}, {"from": "gpt", "value": "x"}]}]
    good = [{"conversations": [{"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "red"}]}]
    trace = _mooncake(folder, "ok.jsonl", _rows(20))
    return {
        "timestamps going backwards (row 151)": ["--trace", _mooncake(folder, "back.jsonl", back)],
        "a bad row after line 100 (121)": ["--trace", _mooncake(folder, "late.jsonl", late)],
        "every row skipped (no input)": ["--trace", _mooncake(folder, "skipped.jsonl", skipped)],
        "window 100:10 (no row)": ["--trace", trace, "--trace-window", "100:10"],
        "window 1e9:1": ["--trace", trace, "--trace-window", "1e9:1"],
        "window 3600:60": ["--trace", trace, "--trace-window", "3600:60"],
        "an hour-long gap": ["--trace", _mooncake(folder, "gap.jsonl", gap)],
        "nanoseconds read as milliseconds": ["--trace", _mooncake(folder, "nanos.jsonl", nanos)],
        "--prompt-length uniform with a trace": ["--trace", trace, "--prompt-length", "uniform"],
        "a 20,000-token row with --strict": [
            "--trace",
            _mooncake(
                folder,
                "long.jsonl",
                [{"timestamp": 0, "input_length": 20_000, "output_length": 8, "hash_ids": list(range(40))}],
            ),
            "--strict",
        ],  # fmt: skip
        "dataset: no human turn": ["--dataset", _dataset(folder, "nohuman.json", json.dumps(convs))],
        'dataset: "value": null': ["--dataset", _dataset(folder, "null.json", json.dumps(null))],
        "dataset: truncated JSON": ["--dataset", _dataset(folder, "cut.json", json.dumps(good * 50)[:-40])],
        "dataset: 100k nested [": ["--dataset", _dataset(folder, "deep.json", "[" * 100_000)],
        "--min-prompt-tokens 100000": [
            "--dataset",
            _dataset(folder, "good.json", json.dumps(good * 5)),
            "--min-prompt-tokens",
            "100000",
        ],  # fmt: skip
        "--prefix-count 2 --prefix-tokens 100000": ["--prefix-count", "2", "--prefix-tokens", "100000"],
        "/etc/passwd as a trace": ["--trace", "/etc/passwd"],
    }


def _cli(verb: str, db: str, options: list[str]) -> tuple[int, str, float]:
    extra = ["--rates", "1,2"] if verb == "sweep" else []
    cmd = [sys.executable, "-m", "engine", verb, "--db", db, "--model", "demo", *options, *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=os.environ.copy())
    return out.returncode, out.stderr.strip(), time.perf_counter() - t0


def _stored(db: str) -> int:
    from storage import open_database
    from storage.jobs import list_jobs
    from storage.runs import count_runs

    base = open_database(db)
    return count_runs(base) + len(list_jobs(base))


def _verdict(code: int, err: str, stored: int) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 2 and len(lines) == 1 and not stored:
        return "ok"
    return f"exit {code}, {len(lines)} lines, {stored} stored: {(lines or ['-'])[-1][:80]}"


def _launch(options: list[str]) -> str:
    """What Launch's check says (the function views/launch.py calls before Submit)."""
    from engine.cli.common import spec_from_args
    from engine.cli.main import build_parser
    from engine.jobs.submission import check_submittable
    from engine.spec import SpecError
    from storage import open_database

    db = open_database(f"sqlite:///{tempfile.mkdtemp()}/launch.db")
    try:
        args = build_parser("submit").parse_args(["submit", "--model", "demo", *options])
        check_submittable(db, spec_from_args(args))
    except SpecError as exc:
        return "ok" if "\n" not in str(exc) else "more than one line"
    except SystemExit as exc:
        return f"argparse exit {exc.code}"
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the table says what went wrong
        return f"{type(exc).__name__}: {str(exc)[:60]}"
    return "accepted"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated names (substrings) of the inputs to try")
    parser.add_argument("--keep", metavar="DIR", help="write the generated inputs here (default: a temporary folder)")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    chosen = {k: v for k, v in _inputs(folder).items() if not args.only or any(o in k for o in args.only.split(","))}
    print("| input | run | submit | sweep | Launch | s to refuse (run) | the line (run) |")
    print("|---|---|---|---|---|---|---|")
    for name, options in chosen.items():
        cells, seconds, line = [], 0.0, ""
        for verb in ("run", "submit", "sweep"):
            db = f"sqlite:///{tempfile.mkdtemp()}/h.db"
            code, err, took = _cli(verb, db, options)
            cells.append(_verdict(code, err, _stored(db)))
            if verb == "run":
                seconds, line = took, (err.splitlines() or [""])[-1]
        cells.append(_launch(options))
        print(f"| {name} | {' | '.join(cells)} | {seconds:.1f} | {line[:110].replace('|', '/')} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
