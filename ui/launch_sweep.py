"""The Launch page's sweeps: several values for some fields, and serving load sweeps (rates or concurrencies).

Both build their axes with :mod:`engine.spec.sweep` (as ``python -m engine sweep`` does), so a
load sweep queued here is the same grid of runs as the CLI's, grouped under one sweep name.
A load sweep stops at saturation unless told not to: its loads are queued in increasing order,
each job marked so that a saturated point's job ends the higher ones as "not run"
(:mod:`engine.jobs.saturation_stop`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import streamlit as st

from engine.spec import Workload, engines, forms
from engine.spec.sweep import Axis, concurrency_axis, field_axis, rate_axis
from engine.spec.text import name_problem
from ui.launch_form import field_kind, sweep_values_widget

LOAD_KINDS = {
    "none": "no load sweep",
    "rates": "request rates (Poisson arrivals, requests/s; inf = all at once)",
    "concurrencies": "concurrencies (most requests in flight)",
}


def parse_load(kind: str, text: str) -> tuple[list[float], str | None]:
    """'1, 2, 4, inf' -> the load values and the problem with them (None when fine)."""
    values: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            return [], f"load sweep: {part!r} is not a number"
        integer = kind == "concurrencies"
        if math.isnan(value) or value <= 0 or (integer and (math.isinf(value) or value != int(value))):
            what = "a positive whole number" if integer else "a positive number or inf"
            return [], f"load sweep: {part!r} must be {what}"
        values.append(int(value) if integer else value)
    return values, (None if values else "load sweep: give at least one value, e.g. 1, 2, 4")


@dataclass
class SweepChoice:
    """What the sweep section asks for: its axes, the sweep's name, the first problem, and whether a
    load sweep stops at saturation."""

    axes: list[Axis] = field(default_factory=list)
    name: str | None = None
    problem: str | None = None
    stop_at_saturation: bool = False


STOP_HELP = (
    "Run the loads in increasing order and stop after the first one whose server was saturated (its queue "
    "grew while it fell behind the offered load, or a higher concurrency gained too little throughput): the "
    "higher loads' jobs end as 'not run', with the reason, on the Jobs page."
)


def load_sweep_form(disabled: bool) -> tuple[Axis | None, str | None, bool]:
    """The serving load axis (one run per rate or concurrency), the problem with its values, and
    whether it stops at saturation (then its values run in increasing order)."""
    kind = st.radio(
        "Serving load sweep", list(LOAD_KINDS), format_func=LOAD_KINDS.get, key="load_sweep", disabled=disabled
    )
    if kind == "none":
        return None, None, False
    placeholder = "1, 2, 4, inf" if kind == "rates" else "1, 4, 16"
    text = st.text_input(f"{kind.capitalize()} (comma-separated)", key="load_values", placeholder=placeholder)
    stop = st.checkbox("Stop at saturation", value=True, key="load_stop", disabled=disabled, help=STOP_HELP)
    values, problem = parse_load(kind, text)
    if problem:
        return None, problem, stop
    values = sorted(values) if stop else values
    return (rate_axis(values) if kind == "rates" else concurrency_axis([int(v) for v in values])), None, stop


def sweep_form(engine: str, disabled: bool) -> SweepChoice:
    """The fields chosen to sweep, the load sweep, the sweep's name and the first problem with the values."""
    sweepable = {("recipe", n): f for n, f in engines.recipe_class(engine).model_fields.items() if n != "engine"}
    sweepable.update(
        {
            ("workload", n): f
            for n, f in Workload.model_fields.items()
            if field_kind(f.annotation)[0] in ("int", "float", "bool", "literal")
        }
    )
    chosen = st.multiselect(
        "Fields to sweep",
        list(sweepable),
        format_func=lambda k: f"{k[0]}: {forms.label(k[1])}",
        key="sweep_fields",
        disabled=disabled,
    )
    choice = SweepChoice()
    for section, name in chosen:
        values, why = sweep_values_widget(section, name, sweepable[(section, name)], disabled)
        choice.axes.append(field_axis(section, name, values))
        choice.problem = choice.problem or why
    load, why, stop = load_sweep_form(disabled)
    choice.problem = choice.problem or why
    if load is not None:
        choice.axes.append(load)
        choice.stop_at_saturation = stop
    if not choice.axes and not chosen:
        return choice
    placeholder = f"sweep {datetime.now():%Y-%m-%d %H:%M}"
    choice.name = st.text_input("Sweep name", key="sweep_name", disabled=disabled, placeholder=placeholder)
    if choice.name:
        choice.problem = choice.problem or name_problem(choice.name, "the sweep name")
    return choice


def grid_caption(axes: list[Any], size: int) -> str:
    """ "3 × 2 = 6 jobs" for the sweep's grid."""
    if not axes:
        return ""
    dims = " × ".join(str(len(a.points)) for a in axes)
    return f"Grid: {dims} = {size} job{'s' if size != 1 else ''}" if len(axes) > 1 else f"Grid: {size} jobs"
