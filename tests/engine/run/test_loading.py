"""A load held for several runs (a sweep's points): reused only by the same model, recipe and device, emptied of
the last run's leftovers first, and unloaded when that fails or another recipe comes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.backends.base import BackendError
from engine.run import loading
from engine.run.loading import HeldLoad, holds_loads, load_or_reuse
from engine.spec import parse_job_spec


class _Engine:
    def __init__(self, fail_between: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_between = fail_between

    def between_runs(self) -> None:
        self.calls.append("between")
        if self.fail_between:
            raise BackendError("cannot empty the cache")

    def unload(self) -> None:
        self.calls.append("unload")


@pytest.fixture
def loads(monkeypatch) -> list[tuple[_Engine, bool]]:
    """Every load the module makes: (its engine, whether it was for several runs)."""
    made: list[tuple[_Engine, bool]] = []

    def fake_load(spec, state, log, several=False):  # type: ignore[no-untyped-def]
        engine = _Engine(fail_between=spec.workload.output_tokens == 13)
        made.append((engine, several))
        return loading.Loaded(SimpleNamespace(label="demo"), engine, SimpleNamespace())  # type: ignore[arg-type]

    monkeypatch.setattr(loading, "load", fake_load)
    return made


class _State:
    note = ""

    def enter(self, phase: str, note: str = "") -> None:
        self.note = note


def _spec(rate: float = 1.0, **recipe: object):  # type: ignore[no-untyped-def]
    workload = {"arrival": "poisson", "rate": rate, "requests": 2}
    return parse_job_spec(
        {"model": {"source": "demo"}, "recipe": {"engine": "transformers", **recipe}, "workload": workload}
    )


def test_the_same_recipe_at_another_load_reuses_the_model(loads) -> None:
    held, lines = HeldLoad(), []
    first = load_or_reuse(_spec(1.0), _State(), lines.append, held)
    again = load_or_reuse(_spec(4.0), _State(), lines.append, held)
    assert again is first and len(loads) == 1 and loads[0][1] is True  # loaded once, for several runs
    assert loads[0][0].calls == ["between"] and held.runs == 2
    assert lines == ["reusing demo, loaded for an earlier run (run 2 on this load)"]
    held.close()
    assert loads[0][0].calls == ["between", "unload"] and held.loaded is None


def test_another_recipe_unloads_the_held_one_first(loads) -> None:
    held = HeldLoad()
    load_or_reuse(_spec(), _State(), lambda _m: None, held)
    load_or_reuse(_spec(dtype="bfloat16"), _State(), lambda _m: None, held)
    assert len(loads) == 2 and loads[0][0].calls == ["unload"] and held.runs == 1
    held.close()


def test_an_engine_that_cannot_empty_its_cache_is_unloaded_not_reused(loads) -> None:
    held = HeldLoad()
    spec = parse_job_spec({"model": {"source": "demo"}, "workload": {"output_tokens": 13}})
    load_or_reuse(spec, _State(), lambda _m: None, held)
    with pytest.raises(BackendError, match="cannot empty"):
        load_or_reuse(spec, _State(), lambda _m: None, held)
    assert loads[0][0].calls == ["between", "unload"] and held.loaded is None


def test_which_recipes_hold_their_load() -> None:
    assert holds_loads(_spec())  # transformers
    assert holds_loads(parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "vllm-server"}}))
    remote = {"engine": "openai", "base_url": "http://127.0.0.1:9/v1", "model_name": "m"}
    assert not holds_loads(parse_job_spec({"model": {"source": "demo"}, "recipe": remote}))
    ranks = {
        "model": {"source": "demo"},
        "device": "cuda:0,1",
        "recipe": {"engine": "transformers", "tensor_parallel": True},
    }
    assert not holds_loads(parse_job_spec(ranks))  # its ranks are processes of their own
