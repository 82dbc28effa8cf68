"""Predicted runs on the pages: the ``?predicted=`` listing filter (Runs) and overlay (Explore), the Run page's
banner and its sections that were not predicted, and Compare's prediction checked against a measurement
(engine/report/predicted.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from engine.report.predicted import (
    NOT_PREDICTED,
    TITLE,
    check_frame,
    prediction_lines,
    with_prediction_columns,
    within_words,
)
from engine.report.runlike import is_predicted
from ui.text import escape_markdown, shown

if TYPE_CHECKING:
    import pandas as pd
    from streamlit.delta_generator import DeltaGenerator

    from engine.report.compare import Comparison
    from engine.report.runlike import RunLike
    from storage import Database
    from storage.frames import RunQuery

# ?predicted= -> storage's listing filter (storage.frames.RunQuery.predicted): measured only unless asked
LISTINGS: dict[str, bool | None] = {"0": False, "1": True, "all": None}
LISTING_WORDS = {"0": "measured runs", "1": "predicted runs", "all": "measured and predicted runs"}


def listing_param(param: str = "predicted") -> str:
    """``?predicted=`` as one of :data:`LISTINGS`' keys (absent: ``0``, measured only), a warning for any other value."""
    raw = st.query_params.get(param)
    if raw is None or raw == "":
        return "0"
    if raw not in LISTINGS:
        st.warning(
            f"Ignoring {param}={shown(raw)}: it is 1 (predicted runs only) or all (both); showing measured runs."
        )
        return "0"
    return raw


def choose_listing(container: DeltaGenerator, key: str) -> bool | None:
    """Measured, predicted or both (``?predicted=`` written back; nothing in the link for measured only): what
    a listing holds, as :class:`storage.frames.RunQuery`'s ``predicted``."""
    options = list(LISTINGS)
    chosen = (
        container.segmented_control(
            "Runs shown", options, default=listing_param(), format_func=LISTING_WORDS.get, key=key
        )
        or "0"
    )
    if chosen == "0":
        st.query_params.pop("predicted", None)
    else:
        st.query_params["predicted"] = chosen
    return LISTINGS[chosen]


def render_banner(run: RunLike) -> None:
    """A predicted run's banner: predicted, not measured; its calibration, band, hardware and tensor parallelism."""
    if not is_predicted(run):
        return
    lines = prediction_lines(run)
    st.warning(
        f"**{TITLE}**: the serving simulator's prediction of this recipe and traffic.\n\n"
        + "\n".join(f"- {escape_markdown(line)}" for line in lines),
        icon=":material/online_prediction:",
    )
    st.badge("PREDICTED", icon=":material/online_prediction:", color="violet")
    st.caption(
        "The figures below are computed from the simulated requests with the same code as a measured run's; their "
        "95 % intervals are the simulated requests' sampling, not the prediction's error: that is its band."
    )


def not_predicted(section: str) -> None:
    """A section a prediction does not have (telemetry, client, server metrics, energy, memory): said so."""
    st.caption(f"**{escape_markdown(section)}**: {NOT_PREDICTED}.")


def render_checks(comparison: Comparison) -> None:
    """Compare: each prediction against the measured run it is compared with, figure by figure."""
    if not comparison.predictions:
        return
    st.subheader("Prediction against measurement")
    for pair in comparison.predictions.values():
        st.markdown(f"**{escape_markdown(pair.heading())}**: {escape_markdown(within_words(pair.checks))}.")
        prediction = comparison.predicted.get(pair.predicted_id) or {}
        st.caption(escape_markdown(str(prediction.get("label") or "no calibration label recorded")))
        st.dataframe(check_frame(pair), hide_index=True, key=f"prediction_check_{pair.predicted_id}")
    st.caption(
        "Error: the predicted figure divided by the measured one, less 1. Band: the leave-one-out median error "
        "the calibration claims for that figure (each calibration run predicted by costs fitted without it); within "
        "the band means the error is no larger. A simulation has no sampling noise, so no significance test applies."
    )


def overlay_predicted() -> bool:
    """Explore's sidebar "overlay predicted runs" (``?predicted=1``; off by default)."""
    with st.sidebar:
        on = st.checkbox(
            "overlay predicted runs",
            value=st.query_params.get("predicted") == "1",
            key="explore_predicted",
            help="the serving simulator's predictions matching these filters, drawn as hollow diamonds labelled "
            "predicted; they never enter a front",
        )
    if on:
        st.query_params["predicted"] = "1"
    else:
        st.query_params.pop("predicted", None)
    return on


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def cached_predicted(_db: Database, db_url: str, token: tuple[int, int], query: RunQuery) -> pd.DataFrame:
    """The predicted runs matching a listing's filters, each with its calibration label and band (its provenance)."""
    from dataclasses import replace

    from storage.frames import query_frame
    from storage.runs import get_runs

    frame = query_frame(_db, replace(query, predicted=True))
    if frame.empty:
        return frame
    return with_prediction_columns(frame, get_runs(_db, [int(i) for i in frame["run_id"]]))
