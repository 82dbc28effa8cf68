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


def test_trial_fields_at_their_defaults_keep_old_fingerprints() -> None:
    from engine.spec import parse_job_spec

    base = {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16}}
    plain = parse_job_spec(base).fingerprint()
    defaults = {"trials": 1, "until_ci_pct": None, "until_metric": "tpot_ms.p50", "max_requests": None}
    assert parse_job_spec({**base, "workload": {"prompt_tokens": 16, **defaults}}).fingerprint() == plain
    assert parse_job_spec({**base, "workload": {"prompt_tokens": 16, "trials": 3}}).fingerprint() != plain


@pytest.mark.parametrize(
    ("workload", "words"),
    [
        ({"max_requests": 100}, "max_requests is only used with until_ci_pct"),
        ({"max_seconds": 60}, "max_seconds is only used with until_ci_pct"),
        ({"until_metric": "ttft_ms.p90"}, "until_metric is only used with until_ci_pct"),
        ({"until_ci_pct": 2, "until_metric": "tokens_per_s"}, "until_metric"),
        ({"trials": 0}, "trials"),
        ({"until_ci_pct": 0}, "until_ci_pct"),
    ],
)
def test_trial_fields_refused(workload, words) -> None:
    with pytest.raises(SpecError) as exc:
        _job(workload)
    assert words in str(exc.value)


def test_presets() -> None:
    from engine.spec.workload import MEASUREMENT_PRESETS, apply_preset

    decision = Workload(prompt_tokens=16, **apply_preset({}, "decision"))
    assert decision.trials == 3 and decision.until_ci_pct == 2.0 and decision.request_cap == 1000
    assert decision.max_seconds == 600
    quick = Workload(**apply_preset({"prompt_tokens": 16, "trials": 4}, "quick"))
    assert quick.trials == 1 and quick.until_ci_pct is None
    assert set(MEASUREMENT_PRESETS) == {"quick", "decision"}
    with pytest.raises(ValueError, match="unknown preset 'slow'"):
        apply_preset({}, "slow")
    assert Workload(prompt_tokens=16, until_ci_pct=2, max_seconds=30).request_cap is None  # time limit only


def test_adaptive_stopping_is_refused_with_tensor_parallelism() -> None:
    spec = {"model": {"source": "demo"}, "recipe": {"engine": "transformers", "tensor_parallel": True}}
    with pytest.raises(SpecError, match="same rounds; use a fixed number of trials"):
        parse_job_spec({**spec, "workload": {"prompt_tokens": 16, "until_ci_pct": 2}})
    assert parse_job_spec({**spec, "workload": {"prompt_tokens": 16, "trials": 3}}).workload.trials == 3


def test_until_metric_is_a_metric_key_and_stored_specs_keep_their_fingerprint():
    base = {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "until_ci_pct": 2}}
    specs = [
        parse_job_spec({**base, "workload": {**base["workload"], "until_metric": m}})
        for m in ("ttft_ms_p90", "ttft_ms.p90")
    ]
    assert {s.workload.until_metric for s in specs} == {"ttft_ms_p90"}
    assert {s.fingerprint() for s in specs} == {"be421de03f7e488b"}  # as stored before keys had one spelling
    assert '"until_metric":"ttft_ms.p90"' in specs[0].canonical_json()  # the stored form, byte for byte
    assert parse_job_spec(base).fingerprint() == "3a1cf8c335a0422a"
