"""Traffic on the pages: Launch's traffic choice and its preview before Submit, and a run's traffic section.

The numbers come from :mod:`engine.report.traffic_preview` (the job's own request source, planned with
the model's light tokenizer) and the figures from :mod:`engine.report.traffic_figures`; this module
only draws them. A preview that fails gives one line, which Launch shows and which disables Submit.
"""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from engine.report.headline import has_due_times
from engine.report.traffic_figures import (
    adherence_figure,
    adherence_words,
    length_figure,
    preview_lines,
    rate_figure,
    run_source_lines,
    send_lateness_ms,
    turns_figure,
    turns_lines,
    turns_ttft_figure,
)
from engine.spec import JobSpec, SpecError, forms, sources
from ui.text import escape_markdown


def _choice_help() -> str:
    """Where the requests come from: each registered source's one line (its own summary)."""
    return "Where the requests come from. " + " ".join(
        f"{c.label.capitalize()}: {c.summary}." for c in sources.all_sources()
    )


def traffic_picker(disabled: bool) -> str:
    """The traffic choice: a registered request source's name."""
    choices = forms.traffic_choices()
    if st.session_state.get("traffic") not in choices:
        st.session_state.pop("traffic", None)  # a source no longer registered (or a bad link): the default
    return st.radio(
        "Traffic",
        list(choices),
        format_func=choices.get,
        key="traffic",
        horizontal=True,
        disabled=disabled,
        help=_choice_help(),
    )


def _stamp(spec: JobSpec) -> tuple[Any, ...]:
    """The input file's size and time, so a file changed on disk is previewed again."""
    path = spec.workload.traffic.input_path()
    try:
        stat = os.stat(os.path.expanduser(path)) if path else None
    except OSError:
        return (path,)
    return (path, stat.st_size, stat.st_mtime_ns) if stat else ()


@st.cache_data(show_spinner="Planning the traffic…", max_entries=16, ttl=3600)
def _cached_preview(spec_json: str, stamp: tuple[Any, ...]) -> tuple[Any, str | None]:
    from engine.report.traffic_preview import PreviewUnavailable, preview

    try:
        return preview(JobSpec.model_validate_json(spec_json)), None
    except PreviewUnavailable as exc:  # said in the panel; the job may still run
        return str(exc), None
    except SpecError as exc:
        return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def checked_preview(spec: JobSpec) -> tuple[Any, str | None]:
    """(the preview of ``spec``'s traffic, None), (why it cannot be previewed here, None), or (None, the one-line
    reason its input is bad: Launch refuses it)."""
    return _cached_preview(spec.model_dump_json(), _stamp(spec))


def preview_panel(preview: Any, expanded: bool = False) -> None:
    """The "Preview traffic" expander: the numbers in words and the figures (a string: why there is none)."""
    if preview is None:
        return
    if isinstance(preview, str):
        st.caption(f"No traffic preview: {escape_markdown(preview)}.")
        return
    title = f"Preview traffic: {preview.source}"
    with st.expander(escape_markdown(title), expanded=expanded, icon=":material/query_stats:"):
        st.markdown("\n".join(f"- {escape_markdown(line)}" for line in preview_lines(preview)))
        for note in preview.notes:
            st.caption(escape_markdown(note[0].upper() + note[1:] + "."))
        figures = [
            *([("traffic_rate", rate_figure(preview.due_s))] if preview.due_s else []),
            *([("traffic_turns", turns_figure(preview.turns_per_session))] if preview.turns_per_session else []),
            ("traffic_prompt", length_figure(preview.prompt_tokens, "prompt")),
            ("traffic_output", length_figure(preview.output_tokens, "output")),
        ]
        for start in range(0, len(figures), 2):  # two a row, no empty column before a figure
            for column, (key, figure) in zip(st.columns(2), figures[start : start + 2], strict=False):
                column.plotly_chart(figure, key=key)
        st.caption(
            "Planned by the job's own request source with the model's tokenizer. Shared-prefix share: prompt "
            "tokens in leading 16-token blocks (each keyed by everything before it) that an earlier prompt sent, "
            "as an unbounded prefix cache would reuse them."
        )


# -- the Run page --------------------------------------------------------------------------------
def render_run(run: Any, agg: Any) -> None:
    """The run's traffic: its source, TTFT per turn of sessions, and schedule adherence (nothing to show:
    nothing drawn). The realised prompt and output lengths are in the tokens figure below."""
    if run.status != "done":
        return
    lines = run_source_lines(run.spec, run.provenance)
    turns = (run.metrics or {}).get("turns") or []
    scheduled = has_due_times(run.spec) and agg is not None and len(agg)
    if not (lines or turns or scheduled):
        return
    st.subheader("Traffic")
    if lines:
        st.markdown("\n".join(f"- {escape_markdown(line)}" for line in lines))
    if turns:
        left, right = st.columns(2)
        left.plotly_chart(turns_ttft_figure(turns), key="traffic_turns_ttft")
        right.markdown("\n".join(f"- {escape_markdown(line)}" for line in turns_lines(turns)))
    if scheduled:
        _, late = send_lateness_ms(agg)
        st.markdown(f"**Schedule adherence**: {escape_markdown(adherence_words(late))}")
        st.plotly_chart(adherence_figure(agg), key="traffic_adherence")
    st.caption("The realised prompt and output lengths per request: the tokens figure below.")
