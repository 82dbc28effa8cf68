"""The workload spec: a load knob that its arrival or prompt-length mode would ignore is refused."""

from __future__ import annotations

import pytest

from engine.spec import SpecError, Workload, parse_job_spec


def _job(workload: dict) -> object:
    return parse_job_spec({"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, **workload}})


@pytest.mark.parametrize(
    ("workload", "knob", "enabler"),
    [
        ({"rate": 2.0}, "rate", "arrival=poisson or gamma"),
        ({"arrival": "concurrency", "max_concurrency": 2, "rate": 2.0}, "rate", "arrival=poisson or gamma"),
        ({"arrival": "max", "rate": 5.0}, "rate", "arrival=poisson or gamma"),
        ({"max_concurrency": 4}, "max_concurrency", "arrival=concurrency, poisson, gamma or max"),
        ({"prompt_length_spread": 0.3}, "prompt_length_spread", "prompt_length=uniform or normal"),
    ],
)
def test_a_knob_the_workload_would_ignore_is_refused_naming_its_enabler(workload, knob, enabler) -> None:
    with pytest.raises(SpecError) as exc:
        _job(workload)
    assert f"{knob} is only used with {enabler}" in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "workload",
    [
        {"arrival": "poisson", "rate": 2.0},
        {"arrival": "gamma", "rate": 2.0, "burstiness": 0.5, "max_concurrency": 4},
        {"arrival": "concurrency", "max_concurrency": 2},
        {"arrival": "max", "max_concurrency": 8},
        {"prompt_length": "uniform", "prompt_length_spread": 0.3},
        {"prompt_length": "normal"},
    ],
)
def test_knobs_with_their_enabler_are_accepted(workload) -> None:
    assert _job(workload)


def test_the_defaults_stay_valid() -> None:
    assert Workload().arrival == "batch" and Workload().rate is None
