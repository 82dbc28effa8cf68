"""The Launch page's sweeps: several values for some fields, and serving load sweeps (rates or concurrencies).

Both build their axes with :mod:`engine.spec.sweep` (as ``python -m engine sweep`` does), so a
load sweep queued here is the same grid of runs as the CLI's, grouped under one sweep name.
"""

from __future__ import annotations

import math
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


def load_sweep_form(disabled: bool) -> tuple[Axis | None, str | None]:
    """The serving load axis (one run per rate or concurrency) and the problem with its values."""
    kind = st.radio(
        "Serving load sweep", list(LOAD_KINDS), format_func=LOAD_KINDS.get, key="load_sweep", disabled=disabled
    )
    if kind == "none":
        return None, None
    placeholder = "1, 2, 4, inf" if kind == "rates" else "1, 4, 16"
    text = st.text_input(f"{kind.capitalize()} (comma-separated)", key="load_values", placeholder=placeholder)
    values, problem = parse_load(kind, text)
    if problem:
        return None, problem
    return (rate_axis(values) if kind == "rates" else concurrency_axis([int(v) for v in values])), None


def sweep_form(engine: str, disabled: bool) -> tuple[list[Axis], str | None, str | None]:
    """(axes, the sweep's name, the first problem with the values) for the fields chosen to sweep."""
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
    axes: list[Axis] = []
    problem = None
    for section, name in chosen:
        values, why = sweep_values_widget(section, name, sweepable[(section, name)], disabled)
        axes.append(field_axis(section, name, values))
        problem = problem or why
    load, why = load_sweep_form(disabled)
    problem = problem or why
    if load is not None:
        axes.append(load)
    if not axes and not chosen:
        return axes, None, problem
    placeholder = f"sweep {datetime.now():%Y-%m-%d %H:%M}"
    name = st.text_input("Sweep name", key="sweep_name", disabled=disabled, placeholder=placeholder)
    return axes, name, problem or (name_problem(name, "the sweep name") if name else None)


def grid_caption(axes: list[Any], size: int) -> str:
    """ "3 × 2 = 6 jobs" for the sweep's grid."""
    if not axes:
        return ""
    dims = " × ".join(str(len(a.points)) for a in axes)
    return f"Grid: {dims} = {size} job{'s' if size != 1 else ''}" if len(axes) > 1 else f"Grid: {size} jobs"
