"""The shared spec base: every float of every spec is finite (an infinity or NaN is never stored)."""

from __future__ import annotations

import math
import typing

import pytest
from pydantic import ValidationError

from engine.spec import AccuracySpec, JobSpec, ModelSpec, SpecError, Workload, engines, parse_job_spec

SPEC_CLASSES = (JobSpec, ModelSpec, AccuracySpec, Workload, *(d.recipe for d in engines.all_engines()))


def _float_fields() -> list[tuple[type, str]]:
    out = []
    for cls in SPEC_CLASSES:
        for name, info in cls.model_fields.items():
            if float in (info.annotation, *typing.get_args(info.annotation)):
                out.append((cls, name))
    return out


def test_every_spec_float_is_found() -> None:
    names = {name for _, name in _float_fields()}
    assert {"rate", "slo_tpot_ms", "gpu_memory_utilization", "timeout_s", "startup_timeout_s"} <= names


@pytest.mark.parametrize(("cls", "field"), _float_fields(), ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "inf", "nan", "Infinity"])
def test_non_finite_floats_are_rejected(cls: type, field: str, value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        cls.model_validate({field: value})
    finite = [e for e in exc.value.errors() if e["loc"][:1] == (field,)]
    assert finite and finite[0]["type"] == "finite_number", finite


@pytest.mark.parametrize(
    "text",
    [
        '{"model": {"source": "demo"}, "workload": {"slo_tpot_ms": Infinity}}',
        '{"model": {"source": "demo"}, "workload": {"slo_ttft_ms": NaN}}',
        '{"model": {"source": "demo"}, "workload": {"arrival": "poisson", "rate": "inf"}}',
    ],
)
def test_parse_job_spec_rejects_non_finite_json_in_one_line(text: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_job_spec(text)
    assert "finite" in str(exc.value) and "\n" not in str(exc.value)


def test_parse_job_spec_rejects_python_infinity() -> None:
    with pytest.raises(SpecError, match=r"workload.slo_tpot_ms: .*finite"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"slo_tpot_ms": math.inf}})
