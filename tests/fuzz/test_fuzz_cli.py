"""Property-based: random argument lists for every verb of ``python -m engine`` (options taken
from the parser itself), with huge and unicode numbers, nan/inf, empty strings and text. Each
ends with exit 0, or exit 1/2 and one ``error:`` line, never a traceback; a rejected command
(exit 2) leaves every table's row count as it was.

Nothing heavy runs: the points where a verb would start a benchmark, a worker or a
micro-benchmark raise :class:`Reached` (input accepted)."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import HUGE, UNICODE_DIGITS, VALUE, record
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from engine.cli.main import build_parser, main

TABLES = ("runs", "requests", "jobs", "workers")


class Reached(BaseException):
    """The verb got as far as starting real work: its input was accepted."""


def _verbs() -> dict[str, list[argparse.Action]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: list(p._actions) for name, p in sub.choices.items()}


VERBS = _verbs()


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory, session_dir, demo_folder):
    """A database, a folder of files to point options at, and the heavy entry points stubbed."""
    from storage import open_database

    root = tmp_path_factory.mktemp("fuzzcli")
    url = f"sqlite:///{root / 'cli.db'}"
    db = open_database(url)
    (root / "spec.json").write_text('{"model": {"source": "demo"}, "workload": {"requests": 2}}')
    (root / "bad.json").write_bytes(b"\xff\x00")
    (root / "prompts.txt").write_text("hello\nworld\n")
    files = [str(root / n) for n in ("spec.json", "bad.json", "prompts.txt", "nope.json")] + [str(root), "/proc/nope"]

    def reached(*_a: Any, **_k: Any) -> None:
        raise Reached

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # relative paths (export -o x) land here, never in the repository
        mp.setattr("engine.run.runner.run_benchmark", reached)
        mp.setattr("engine.jobs.sweep.PointProcess.run", reached)
        mp.setattr("engine.jobs.worker.Worker.run", reached)
        mp.setattr("engine.whatif.microbench.run_microbench", reached)
        yield {"url": url, "db": db, "root": root, "files": files}


def _counts(db: Any) -> dict[str, int]:
    with db.engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES}


def _value_for(action: argparse.Action, files: list[str]) -> st.SearchStrategy:
    """Values for one option: its choices, plausible values for its kind, and anything."""
    options = [VALUE, HUGE, UNICODE_DIGITS]
    if action.choices:
        options.append(st.sampled_from(sorted(map(str, action.choices))))
    dest = action.dest
    if dest in ("spec", "prompt_file", "quality_corpus", "output"):
        options = [st.sampled_from(files), st.just("out.html")]  # never a path outside the test's folder
    elif dest == "db":
        options = [st.sampled_from(["sqlite:////proc/nope/x.db", "notadb://x", "postgresql://u:p@127.0.0.1:1/x", ""])]
    elif dest == "model":
        options.append(st.sampled_from(["demo", "synthetic:smollm2-135m", "org/name", "./nope", "x.gguf"]))
    elif dest in ("engine",):
        options.append(st.sampled_from(["transformers", "vllm", "vllm-server", "openai", "ideal"]))
    elif dest == "knob":
        names = st.sampled_from(["drop_layers", "quantization", "dtype", "extra_args", "batch", "", "engine"])
        options.append(st.tuples(names, VALUE).map("=".join))
    elif dest == "base_url":
        options.append(st.just("http://127.0.0.1:9/v1"))  # a closed port: refused at once
    else:
        options.append(st.integers(0, 64).map(str))
    return st.one_of(options)


@st.composite
def argv(draw: Any, files: list[str]) -> list[str]:
    verb = draw(st.sampled_from(sorted(VERBS)))
    # --verbose prints tracebacks on purpose (tests/engine/cli/test_bad_input.py covers it)
    actions = [a for a in VERBS[verb] if not isinstance(a, argparse._HelpAction) and a.dest != "verbose"]
    optional = [a for a in actions if a.option_strings]
    positional = [a for a in actions if not a.option_strings]
    args = [verb]
    for action in positional:
        if draw(st.booleans()) or len(positional) == 1:
            args.append(draw(_value_for(action, files)))
    for action in draw(st.lists(st.sampled_from(optional), max_size=6)) if optional else []:
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            args.append(flag)
        else:
            value = draw(_value_for(action, files))
            args.append(f"{flag}={value}" if value.startswith("-") or draw(st.booleans()) else flag)
            if not args[-1].startswith(f"{flag}="):
                args.append(value)
    if draw(st.integers(0, 9)) == 0:  # now and then a stray token
        args.insert(draw(st.integers(1, len(args))), draw(VALUE))
    return args


def _run(args: list[str], url: str) -> tuple[int | str, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code: int | str = main([*args, "--db", url] if "--db" not in " ".join(args) else args)
        except Reached:
            code = "reached"
        except SystemExit as exc:  # --help prints and exits 0
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def _check(args: list[str], env: dict[str, Any]) -> None:
    before = _counts(env["db"])
    code, err = _run(args, env["url"])
    assert "Traceback" not in err, (args, err)
    if code in ("reached", 0):
        record("cli", "accepted" if code == 0 else "accepted (work started)")
        return
    lines = err.strip().splitlines()
    assert code in (1, 2) and lines, (args, code, err)
    last = lines[-1]
    assert last.startswith(("error: ", "run ", "job ")) and "unexpected" not in last, (args, err)
    if code == 2:
        assert len(lines) == 1, (args, err)
        assert _counts(env["db"]) == before, args  # nothing half-stored
        record("cli", "rejected, one line")
    else:
        record("cli", "failed, one line")


@given(data=st.data())
def test_random_argument_lists(cli_env, data):
    _check(data.draw(argv(cli_env["files"])), cli_env)


@pytest.mark.parametrize(
    "args",
    [
        ["show", "999999999999999999999999999999"],
        ["export", "--runs", "1,²"],
        ["jobs", "--limit", "٣"],
        ["submit", "--model", "demo", "--timeout", "nan"],
        ["runs", "--db", "sqlite:////proc/nope/x.db"],
        ["help"],
        [],
        ["--verbose"],
    ],
)
def test_known_cases(cli_env, args):
    _check(args, cli_env)


def test_files_stay_in_the_test_folder(cli_env):
    assert not (Path(__file__).resolve().parents[2] / "out.html").exists()
