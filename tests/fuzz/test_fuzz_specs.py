"""Property-based: job specs of random shapes and values for every field, as dicts, JSON texts
and ``--spec`` files. Each ends as a valid spec (that survives a JSON round trip) or one
SpecError line; through the CLI, a rejected file stores nothing."""

from __future__ import annotations

import contextlib
import io
import json
import typing
from typing import Any

import pytest
from fuzz_support import VALUE, record
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from engine.cli.main import main
from engine.spec import AccuracySpec, JobSpec, ModelSpec, SpecError, Workload, engines, parse_job_spec, sources

RECIPE_CLASSES = [(d.name, d.recipe) for d in engines.all_engines()]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
MODELS = st.sampled_from(["demo", "synthetic:smollm2-135m", "synthetic:llama-3-8b", "org/name", "/nope", "x.gguf", ""])


def _field_values(info: Any, junk: bool) -> st.SearchStrategy:
    """Values for one pydantic field: its default, its choices, small and huge numbers, and (junk) anything."""
    default = [] if info.is_required() else [st.just(info.get_default(call_default_factory=True))]
    options: list[st.SearchStrategy] = default + ([JSON, VALUE] if junk else [])
    for arg in typing.get_args(info.annotation) or (info.annotation,):
        if typing.get_origin(arg) is typing.Literal:
            options.append(st.sampled_from(typing.get_args(arg)))
        elif arg is int:
            options.append(st.integers(0, 64) | st.integers(-(2**65), 2**65) if junk else st.integers(1, 64))
        elif arg is float:
            options.append(st.floats(allow_nan=True, allow_infinity=True) if junk else st.floats(0.01, 10))
        elif arg is bool:
            options.append(st.booleans())
        elif arg is str:
            options.append(st.sampled_from(["/nope.jsonl", "hf:org/x", "p.txt", ""]) | st.text(max_size=12))
    return st.one_of(options)


def _section(model: type, extra: dict[str, st.SearchStrategy] | None = None, junk: bool = True) -> st.SearchStrategy:
    fields = {name: _field_values(info, junk) for name, info in model.model_fields.items()}
    fields.update(extra or {})
    if not junk:
        return st.fixed_dictionaries({}, optional=fields)
    typo = st.dictionaries(st.sampled_from(["worklaod", "qualty", "devcie", "Requests", "dtpye"]), JSON, max_size=1)
    return st.tuples(st.fixed_dictionaries({}, optional=fields), typo).map(lambda t: {**t[0], **t[1]})


def _traffic(junk: bool) -> st.SearchStrategy:
    """A traffic section of any registered source (its name, or junk, under ``source``), or junk."""
    sections = [
        _section(cls, {"source": st.just(sources.name_of(cls)) | (VALUE if junk else st.nothing())}, junk)
        for cls in sources.all_sources()
    ]
    return st.one_of(sections + ([JSON] if junk else []))


# Flat traffic fields beside the workload's others (specs stored before Workload.traffic, flat overrides).
FLAT = {n: _field_values(c.model_fields[n], True) for c in sources.all_sources() for n in c.option_names()}
RECIPES = st.one_of(
    [_section(cls, {"engine": st.just(engine) | VALUE}) for engine, cls in RECIPE_CLASSES] + [st.just({}), JSON]
)
SPECS = st.fixed_dictionaries(
    {"model": st.one_of(_section(ModelSpec, {"source": MODELS}), MODELS, JSON)},
    optional={
        "recipe": RECIPES,
        "workload": st.one_of(
            _section(Workload, {"traffic": _traffic(True)}),
            _section(Workload, {**FLAT, "traffic": _traffic(True)}),
            JSON,
        ),
        "quality": st.one_of(_section(AccuracySpec, {"metrics": st.lists(st.sampled_from(["ppl", "fidelity"]))}), JSON),
        "device": st.sampled_from(["cpu", "cuda:0", "cuda:0,1", "CPU ", "gpu"]) | VALUE,
        "name": st.text(max_size=30) | JSON,
        "worklaod": JSON,
        "qualty": JSON,
        "devcie": JSON,
    },
)


# Mostly valid specs: each field at its default, one of its choices or a small number.
PLAUSIBLE = st.fixed_dictionaries(
    {"model": st.fixed_dictionaries({"source": st.sampled_from(["demo", "synthetic:smollm2-135m"])})},
    optional={
        "recipe": st.one_of([_section(cls, {"engine": st.just(engine)}, junk=False) for engine, cls in RECIPE_CLASSES]),
        "workload": _section(Workload, {"traffic": _traffic(False)}, junk=False),
        "device": st.sampled_from(["cpu", "cuda:0"]),
        "name": st.text(max_size=30),
    },
)
SPECS = PLAUSIBLE | SPECS


def _check(data: Any, suite: str) -> JobSpec | None:
    """parse_job_spec ends in a spec or one SpecError line, nothing else."""
    try:
        spec = parse_job_spec(data)
    except SpecError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        record(suite, "rejected, one line")
        return None
    again = parse_job_spec(spec.canonical_json())  # what is stored can be read back
    assert again == spec and again.fingerprint() == spec.fingerprint()
    record(suite, "valid spec")
    return spec


@given(SPECS)
def test_random_spec_dicts(data):
    spec = _check(data, "spec")
    if spec is None:
        return
    from engine.run.preflight import preflight

    try:  # the checks before loading: pass, or one SpecError line
        preflight(spec, runtime=False)
    except SpecError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)


@given(SPECS.map(json.dumps) | st.text(max_size=60) | JSON.map(json.dumps))
def test_random_spec_json_texts(data):
    _check(data, "spec")


def _counts(db: Any) -> tuple[int, int]:
    with db.engine.connect() as conn:
        return tuple(conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in ("jobs", "runs"))


@pytest.fixture(scope="module")
def spec_db(tmp_path_factory, session_dir):
    from storage import open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('fuzzspec') / 'spec.db'}"
    return url, open_database(url)


FILE_BYTES = st.one_of(
    SPECS.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=80),
    st.integers(1, 3000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1, 3000).map(lambda n: ('{"model": ' * n + '{"source": "demo"}' + "}" * n).encode()),
    st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"\xef\xbb\xbf{}", b"", b"null", b"\x00" * 10, b'{"model": {"source": "demo"}}']),
)


@given(FILE_BYTES)
def test_random_spec_files_through_submit(spec_db, tmp_path_factory, content):
    url, db = spec_db
    path = tmp_path_factory.mktemp("specfile") / "spec.json"
    path.write_bytes(content)
    before = _counts(db)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["submit", "--spec", str(path), "--db", url])
    message = err.getvalue()
    assert "Traceback" not in message
    if code == 0:
        assert _counts(db) == (before[0] + 1, before[1])
        record("spec-file", "queued")
        return
    lines = message.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), message
    assert "unexpected" not in lines[0], lines[0]
    assert _counts(db) == before  # nothing half-stored
    record("spec-file", "rejected, one line")
