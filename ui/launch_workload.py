"""The Launch page's workload: a preset, the traffic choice (which request source), then the workload's fields.

The fields come from the spec (:func:`ui.launch_form.section_form`); the traffic choice shows only the
chosen source's fields (:data:`engine.spec.forms.TRAFFIC_FIELDS`), so a trace's time scale never sits
beside a synthetic prompt length. The preview of the traffic is :mod:`ui.traffic_view`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.spec import Workload, forms
from engine.spec.workload import MEASUREMENT_PRESETS
from ui.launch_form import section_form
from ui.text import escape_markdown
from ui.traffic_view import traffic_picker

WORKLOAD_PRESETS: dict[str, dict[str, Any]] = {
    "chat: 128 in / 128 out": {"prompt_tokens": 128, "output_tokens": 128, "requests": 8, "batch_size": 1},
    "long prompt: 2048 in / 64 out": {"prompt_tokens": 2048, "output_tokens": 64, "requests": 4, "batch_size": 1},
    "batch throughput": {"prompt_tokens": 128, "output_tokens": 128, "requests": 32, "batch_size": 8},
    "quick check: 16 in / 4 out": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "batch_size": 1},
    # measurement presets (engine/spec/workload.py): how sure the figures must be, on the chat shape
    "decision: chat, TPOT p50 within ±2 % (3+ repeats, at most 1000 requests)": {
        "prompt_tokens": 128,
        "output_tokens": 128,
        "requests": 20,
        "batch_size": 1,
        **MEASUREMENT_PRESETS["decision"],
    },
}


def workload_form(disabled: bool, device: str) -> tuple[dict[str, Any], list[str]]:
    """A workload preset, the traffic choice, then the workload's fields (the preset's values as defaults); a
    preset whose fields were edited says so (its name alone would describe another workload)."""
    st.subheader("Workload")
    preset = st.selectbox("Workload preset", list(WORKLOAD_PRESETS), key="preset", disabled=disabled)
    traffic = traffic_picker(disabled)
    defaults = {
        n: WORKLOAD_PRESETS[preset].get(n, f.get_default(call_default_factory=True))
        for n, f in Workload.model_fields.items()
    }
    values, problems = section_form("workload", Workload, defaults, f"wl_{preset}_", disabled, device, traffic)
    own = set(forms.traffic_hidden(traffic)) | (
        {"prompt_tokens"} if "prompt_tokens" not in forms.TRAFFIC_FIELDS[traffic] else set()
    )
    edited = {
        n: values[n] for n, v in WORKLOAD_PRESETS[preset].items() if n in values and values[n] != v and n not in own
    }
    if edited:
        st.caption(
            f"Preset “{escape_markdown(preset)}”, edited: "
            + escape_markdown(", ".join(f"{n.replace('_', ' ')} {v}" for n, v in edited.items()))
        )
    return values, problems
