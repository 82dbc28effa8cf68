"""The Launch page's recipe presets: one button per named recipe of the toolbox.

The presets this device (and model kind) can run come first; the others are greyed,
with the reason the spec's rules give. Picking one fills the recipe form (every knob of
the preset's engine: the preset's values, the rest at their defaults), so each field
stays editable afterwards.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.spec import engines
from engine.spec.presets import RecipePreset, preset_by_key, preset_of, presets_for
from ui.launch_form import field_kind
from ui.text import escape_markdown

COLUMNS = 3


def apply_preset(preset: RecipePreset) -> None:
    """Put the preset's recipe into the form's widgets (a button callback: runs before the widgets are drawn)."""
    state = st.session_state
    state["engine"] = preset.engine
    state["recipe_preset"] = preset.key
    for name, info in engines.recipe_class(preset.engine).model_fields.items():
        if name == "engine":
            continue
        value = preset.recipe.get(name, info.get_default(call_default_factory=True))
        key = f"recipe_{preset.engine}_{name}"
        kind, _, optional = field_kind(info.annotation)
        if kind in ("int", "float") and optional:
            state[f"{key}__set"] = value is not None
            if value is None:
                state.pop(key, None)
                continue
        if kind == "str" and value is None:
            value = ""
        state[key] = value


def preset_picker(device: str, source: str, disabled: bool) -> None:
    """The preset buttons: runnable ones first; the others disabled, their reasons listed below."""
    rated = presets_for(device, source or "demo")
    st.caption("Start from a named recipe; it fills the fields below, and every field stays editable.")
    columns = st.columns(COLUMNS)
    for i, (preset, why) in enumerate(rated):
        with columns[i % COLUMNS]:
            st.button(
                preset.name,
                key=f"recipe_preset_{preset.key}",
                on_click=apply_preset,
                args=(preset,),
                disabled=disabled or why is not None,
                help=f"Not on {device}: {why}" if why else preset.description,
                width="stretch",
                wrap=True,
            )
    blocked = [(p, why) for p, why in rated if why]
    if blocked:
        st.caption(
            f"Greyed, not on {escape_markdown(device)}: "
            + "; ".join(f"**{escape_markdown(p.name)}**: {escape_markdown(why)}" for p, why in blocked)
        )


def picked_line(recipe: dict[str, Any]) -> str | None:
    """ "Preset: bfloat16 — ..." for the recipe in the form; says when the fields were edited after picking."""
    now = preset_of(recipe)
    picked = preset_by_key(st.session_state.get("recipe_preset", ""))
    if now is not None:
        return f"Preset **{now.name}**: {now.description}"
    if picked is not None:
        return f"Preset **{picked.name}**, edited."
    return None
