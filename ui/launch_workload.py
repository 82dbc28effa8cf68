"""The Launch page's workload: a preset, the traffic choice (which request source), that source's options, then
the workload's other fields.

Both forms come from the spec (:func:`ui.launch_form.section_form`): the source's options from its options
class (:mod:`engine.spec.sources`), so a source registered later shows its own fields, and a trace's time
scale never sits beside a synthetic prompt length. The preview of the traffic is :mod:`ui.traffic_view`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.spec import Workload, forms, sources
from engine.spec.workload import MEASUREMENT_PRESETS
from ui.launch_form import section_form
from ui.text import escape_markdown
from ui.traffic_view import traffic_picker

WORKLOAD_PRESETS: dict[str, dict[str, Any]] = {
    "chat: 128 in / 128 out": {"prompt_tokens": 128, "output_tokens": 128, "requests": 8, "batch_size": 1},
    "long prompt: 2048 in / 64 out": {"prompt_tokens": 2048, "output_tokens": 64, "requests": 6, "batch_size": 1},
    "batch throughput": {"prompt_tokens": 128, "output_tokens": 128, "requests": 32, "batch_size": 8},
    "quick check: 16 in / 4 out": {"prompt_tokens": 16, "output_tokens": 4, "requests": 6, "batch_size": 1},
    # measurement presets (engine/spec/workload.py): how sure the figures must be, on the chat shape
    "decision: chat, TPOT p50 within ±2 % (3+ repeats, at most 1000 requests)": {
        "prompt_tokens": 128,
        "output_tokens": 128,
        "requests": 20,
        "batch_size": 1,
        **MEASUREMENT_PRESETS["decision"],
    },
}


def _defaults(cls: Any, preset: dict[str, Any], start: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each field's first value: the preset's where it names the field, else the source's start, else its default."""
    out = {}
    for name, info in cls.model_fields.items():
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        out[name] = preset.get(name, (start or {}).get(name, default))
    return out


def traffic_form(source: str, preset: str, disabled: bool) -> tuple[dict[str, Any], list[str]]:
    """The chosen source's options (its own fields, labelled by it), as the workload's ``traffic`` section."""
    cls = sources.get(source)
    defaults = _defaults(cls, WORKLOAD_PRESETS[preset], cls.launch_start)
    values, problems = section_form(
        forms.traffic_section(source), cls, defaults, f"tr_{preset}_{source}_", disabled, order=cls.option_names()
    )
    return {"source": source, **values}, problems


def workload_form(disabled: bool, device: str) -> tuple[dict[str, Any], list[str]]:
    """A workload preset, the traffic choice and its options, then the workload's fields (the preset's values as
    defaults); a preset whose fields were edited says so (its name alone would describe another workload)."""
    st.subheader("Workload")
    preset = st.selectbox("Workload preset", list(WORKLOAD_PRESETS), key="preset", disabled=disabled)
    source = traffic_picker(disabled)
    traffic, traffic_problems = traffic_form(source, preset, disabled)
    values, problems = section_form(
        "workload", Workload, _defaults(Workload, WORKLOAD_PRESETS[preset]), f"wl_{preset}_", disabled, device, source
    )
    hidden = set(forms.traffic_hidden(source))
    shown = {**values, **traffic}
    edited = {
        n: shown[n] for n, v in WORKLOAD_PRESETS[preset].items() if n in shown and shown[n] != v and n not in hidden
    }
    if edited:
        st.caption(
            f"Preset “{escape_markdown(preset)}”, edited: "
            + escape_markdown(", ".join(f"{n.replace('_', ' ')} {v}" for n, v in edited.items()))
        )
    return {**values, "traffic": traffic}, traffic_problems + problems
