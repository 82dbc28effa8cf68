"""ARCHITECTURE.md's "How to add an engine", kept true: one registered descriptor is all the app needs.

A fake engine, registered only inside these tests (its recipe and backend classes are defined here), appears
in the Launch form, ``python -m engine knobs``, the CLI's ``--engine`` choices and storage's knob columns,
and a real run through the harness (``python -m engine run``) is stored, titled by its recipe, compared
with another engine's run in words and exported, with nothing else changed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import pytest
from pydantic import Field, model_validator
from streamlit.testing.v1 import AppTest

from engine.backends.base import Backend, LoadReport, Progress, Request, TokenScores
from engine.measure.records import RequestRecord
from engine.spec import engines, parse_job_spec
from engine.spec.descriptor import EngineDescriptor, FormGroups
from engine.spec.recipes import EngineRecipe
from engine.spec.rules import Dependency, unused_knob_problems

if TYPE_CHECKING:
    from engine.weights.models import ResolvedModel

T = TypeVar("T")
APP = str(Path(__file__).resolve().parents[1] / "app.py")


DEPENDENCIES: tuple[Dependency, ...] = (("boost", lambda r: r["speed"] == "fast", "speed=fast"),)


class FakeRecipe(EngineRecipe):
    """Knobs of an engine that exists only in this test."""

    engine: Literal["fake"] = "fake"
    speed: Literal["slow", "fast"] = Field(default="slow", description="How fast the fake engine pretends to be")
    boost: int = Field(default=0, ge=0, le=10, description="Extra speed (only with speed=fast)")
    note: str | None = Field(default=None, description="A free-text knob")

    @model_validator(mode="after")
    def _check(self) -> FakeRecipe:
        problems = unused_knob_problems(DEPENDENCIES, dict(self), self.field_defaults())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def describe(self) -> str:
        return f"fake {self.speed}" + (f" +{self.boost}" if self.boost else "")


FAKE = EngineDescriptor(
    name="fake",
    recipe=FakeRecipe,
    summary="an engine registered by a test",
    backend="tests.test_add_an_engine:FakeBackend",
    knob_dependencies=DEPENDENCIES,
    form=FormGroups(
        basic=("speed", "boost"), labels={"speed": "Fake speed", "boost": "Fake boost", "note": "Fake note"}
    ),
)


class FakeBackend(Backend):
    """The test engine's backend: every request gets its tokens 2 ms apart on its own loop (a harness test)."""

    name = "fake"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def load(self, model: ResolvedModel, recipe: EngineRecipe, device: str, progress: Progress) -> LoadReport:
        return LoadReport(load_s=0.01, device_name="a fake device", vocab_size=1000, context_length=4096)

    def tokenizer(self) -> None:
        return None

    def run(self, coro: Coroutine[object, object, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        for record in records:
            record.send_ns = time.perf_counter_ns()
        for _ in range(batch[0].max_new_tokens):
            await asyncio.sleep(0.002)
            for record in records:
                record.add_chunk(time.perf_counter_ns(), 1)

    def info(self) -> dict[str, str]:
        return {"engine": "fake", "device_name": "a fake device"}

    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[TokenScores]:
        raise NotImplementedError("the fake engine scores nothing")

    def measuring_started(self) -> None:
        return None

    def peak_memory(self) -> tuple[int | None, str] | None:
        return None, "not measured: a fake engine"

    def unload(self) -> None:
        self.loop.close()


@pytest.fixture
def fake_engine() -> Iterator[EngineDescriptor]:
    engines.register(FAKE)
    yield FAKE
    engines.unregister(FAKE.name)


def test_the_fixture_adds_the_engine_and_takes_it_away(fake_engine):
    assert engines.names()[-1] == "fake" and engines.find("fake") is FAKE
    spec = parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "fake", "speed": "fast", "boost": 2}})
    assert isinstance(spec.recipe, FakeRecipe) and spec.recipe.describe() == "fake fast +2"
    assert json.loads(spec.canonical_json())["recipe"] == {"engine": "fake", "speed": "fast", "boost": 2, "note": None}
    assert parse_job_spec(spec.canonical_json()).fingerprint() == spec.fingerprint()
    with pytest.raises(ValueError, match="boost is only used with speed=fast"):
        parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "fake", "boost": 2}})
    with pytest.raises(ValueError, match="registered already"):
        engines.register(FAKE)


def test_without_the_fixture_the_engine_is_unknown():
    assert "fake" not in engines.names()
    with pytest.raises(ValueError, match="unknown engine 'fake'"):
        parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "fake"}})


def test_the_launch_form_offers_it_with_its_basic_fields(fake_engine, db, db_url, monkeypatch):
    from storage import jobs

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("views/launch.py").run()
    assert "fake" in at.selectbox(key="engine").options
    at.selectbox(key="engine").select("fake").run()
    assert not at.exception
    labels = {w.label for kind in ("selectbox", "number_input", "text_input") for w in at.get(kind)}
    assert "Fake speed" in labels and "Fake boost" not in labels  # boost is used only with speed=fast
    at.selectbox(key="recipe_fake_speed").select("fast").run()
    assert "Fake boost" in {w.label for w in at.number_input}
    assert [e.value for e in at.error] == []
    at.selectbox(key="preset").select("quick check: 16 in / 4 out").run()
    assert not at.button(key="submit").disabled
    at.button(key="submit").click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["recipe"] == {"engine": "fake", "speed": "fast", "boost": 0, "note": None}


def test_the_knobs_verb_lists_its_knobs(fake_engine, capsys):
    from engine.cli.main import main

    assert main(["knobs", "--engine", "fake", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["knob"] for r in rows] == ["speed", "boost", "note"]
    assert rows[0]["default"] == "slow" and rows[0]["description"].startswith("How fast")


def test_the_cli_accepts_it_as_an_engine(fake_engine, db, db_url, capsys):
    from engine.cli.common import spec_from_args
    from engine.cli.main import build_parser, main
    from storage import jobs

    parser = build_parser()
    args = parser.parse_args(["run", "--engine", "fake", "--model", "demo", "--knob", "speed=fast"])
    assert spec_from_args(args).recipe == FakeRecipe(speed="fast")
    assert main(["submit", "--engine", "fake", "--model", "demo", "--knob", "speed=fast", "--db", db_url]) == 0
    [job] = jobs.list_jobs(db)
    assert job.spec["recipe"]["engine"] == "fake"
    assert main(["run", "--engine", "warp", "--model", "demo"]) == 2
    assert "available: transformers, vllm, vllm-server, openai, fake" in capsys.readouterr().err


def test_storage_keeps_its_changed_knobs_in_knobs_json(fake_engine, db):
    from sqlalchemy import text

    from storage.columns import expand_knobs
    from storage.runs import NewRun, save_run

    spec = parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "fake", "speed": "fast", "boost": 3}})
    run_id = save_run(
        db,
        NewRun(
            status="failed",
            spec=spec.model_dump(mode="json"),
            fingerprint=spec.fingerprint(),
            model="demo",
            engine="fake",
            device="cpu",
            error="the fake engine does not run",
        ),
    )
    with db.engine.connect() as conn:
        stored = conn.execute(text("SELECT knobs_json FROM runs WHERE id = :i"), {"i": run_id}).scalar_one()
    knobs = json.loads(stored)
    assert knobs["recipe"] == {"speed": "fast", "boost": 3}
    recipe, _ = expand_knobs(knobs, "fake")
    assert recipe == {"speed": "fast", "boost": 3, "note": None}


@pytest.mark.slow
def test_a_real_run_is_stored_titled_compared_and_exported(fake_engine, db, db_url, capsys):
    from types import SimpleNamespace

    from seed_runs import spec_dict

    from engine.cli.main import main
    from engine.report.export import comparison_html
    from engine.report.naming import run_name
    from engine.report.recipes import context_differences
    from storage.runs import get_requests, get_run

    args = ["run", "--db", db_url, "--json", "--engine", "fake", "--model", "synthetic:smollm2-135m"]
    assert main([*args, "--knob", "speed=fast", "--knob", "boost=2", "--requests", "6", "--output-tokens", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = get_run(db, out["run_id"])
    assert out["status"] == "done" and out["completed"] == 6 and run.device_name == "a fake device"
    assert "fake fast +2" in run_name(run) or "speed fast" in run_name(run)
    other = SimpleNamespace(spec=spec_dict(), engine="transformers", device_name="test CPU")
    assert any(d.startswith("engine fake") for d in context_differences(run, other))
    assert "fake" in comparison_html([run], {run.id: get_requests(db, run.id)}, run.id)
