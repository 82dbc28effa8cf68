"""A seeded recipe study for page and browser tests: four trials (the base, a feasible faster one,
an infeasible int8 one, a pruned combination) without running anything."""

from __future__ import annotations

from typing import Any

from engine.optimize.study import parse_definition
from storage import studies

DEFINITION = {
    "name": "smol",
    "base": {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 8, "requests": 2}},
    "objectives": ["tpot_p50"],
    "constraints": {"max_ppl_increase_pct": 2.0},
    "budget": {"trials": 4},
    "knobs": ["dtype", "quantization"],
}


def _trial(db: Any, study_id: int, number: int, params: dict, status: str, tpot=None, ppl_pct=None, **fields):
    trial = studies.add_trial(db, study_id, number, params, status=status)
    if tpot is not None:
        fields.update(
            measured={"tpot_ms_p50": tpot, "ttft_ms_p99": 3 * tpot, "ppl_increase_pct": ppl_pct},
            values=[tpot],
            feasible=ppl_pct <= 2.0,
            run_id=number + 1,
        )
    studies.update_trial(db, trial.id, **fields)


def seed_study(db: Any) -> Any:
    """The study ``smol`` with its four trials; returns the study."""
    d = parse_definition(DEFINITION)
    s = studies.create_study(db, d.name, d.model_dump(mode="json"), submitted_by="test")
    base = {"dtype": "auto", "quantization": "none"}
    _trial(db, s.id, 0, base, "complete", 50.0, 0.0, predicted={"tpot_ms": 45.0, "fits": True})
    _trial(db, s.id, 1, {**base, "dtype": "bfloat16"}, "complete", 40.0, 0.5, predicted={"tpot_ms": 30.0, "fits": True})
    int8 = {**base, "quantization": "torch_dynamic_int8"}
    _trial(db, s.id, 2, int8, "complete", 20.0, 204.0, reason="perplexity increase <= 2 % (measured +204.0 %)")
    why = "torch_dynamic_int8 quantizes float32 Linear layers; use dtype=float32 (or auto)"
    _trial(db, s.id, 3, {"dtype": "bfloat16", "quantization": "torch_dynamic_int8"}, "pruned", reason=why)
    return s
