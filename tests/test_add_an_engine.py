"""ARCHITECTURE.md's "How to add an engine", kept true: one registered descriptor is all the app needs.

A fake engine, registered only inside these tests (its recipe class is defined here), appears
in the Launch form, ``python -m engine knobs``, the CLI's ``--engine`` choices, and storage's
knob columns, with nothing else changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field, model_validator
from streamlit.testing.v1 import AppTest

from engine.spec import engines, parse_job_spec
from engine.spec.descriptor import EngineDescriptor, FormGroups
from engine.spec.recipes import EngineRecipe
from engine.spec.rules import Dependency, unused_knob_problems

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
    backend="tests.test_add_an_engine:NoBackend",  # never loaded: nothing here runs a job
    knob_dependencies=DEPENDENCIES,
    form=FormGroups(
        basic=("speed", "boost"), labels={"speed": "Fake speed", "boost": "Fake boost", "note": "Fake note"}
    ),
)


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
