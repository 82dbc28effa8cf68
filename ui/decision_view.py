"""Compare's decision: one line per compared run (engine/report/decision.py) and the button that queues
the repeats which would make it decision-grade (operators only, as every submit button)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import streamlit as st

from engine.report.decision import REPEAT_TRIALS, repeat_specs
from engine.spec import SpecError
from storage import StorageError
from ui import auth
from ui.text import escape_markdown

REPEAT_TIMEOUT_S = 3600.0


def _repeat_words(count: int) -> str:
    return (
        f"{count} one-trial jobs: {REPEAT_TRIALS} rounds of the compared runs' specs, interleaved (the baseline "
        "first in each round), so drift of the machine hits every recipe alike and each recipe's trials give an "
        "interval that includes it"
    )


def render_decision(db: Any, comparison: Any, runs: list) -> None:
    """The decision lines, and the repeat button when a line says repeats would help."""
    st.subheader("Decision")
    st.markdown("\n".join(f"- {escape_markdown(d.text)}" for d in comparison.decisions.values()))
    if not any(d.repeat for d in comparison.decisions.values()):
        return
    problem = None
    try:
        specs = repeat_specs(runs, comparison.baseline_id)
    except SpecError as exc:
        specs, problem = [], str(exc)
    why_not = auth.cannot("launch")
    clicked = st.button(
        f"Queue repeats to decide ({len(specs)} jobs)" if specs else "Queue repeats to decide",
        icon=":material/replay:",
        key="compare_repeat",
        disabled=bool(why_not or problem),
        help=why_not or problem or f"Queues {_repeat_words(len(specs))}. Compare the new runs when they are done.",
    )
    if why_not or problem:
        st.caption(f"Cannot queue repeats: {escape_markdown(why_not or problem)}.")
    if clicked and specs:
        queue_repeats(db, specs)


def queue_repeats(db: Any, specs: list) -> list[int]:
    """Check and queue ``specs`` together in their order (one transaction); the job ids, or [] with an error shown."""
    from engine.jobs.submission import check_submittable
    from storage import jobs

    why_not = auth.cannot("launch")  # asked again: the button is not the only way here
    if why_not:
        st.error(f"Nothing was queued: {escape_markdown(why_not)}")
        return []
    try:
        for spec in specs:
            check_submittable(db, spec)
        sweep = f"repeats to decide {datetime.now():%Y-%m-%d %H:%M:%S}"
        ids = jobs.submit_many(db, specs, sweep=sweep, timeout_s=REPEAT_TIMEOUT_S, submitted_by=auth.actor())
    except (SpecError, StorageError, ValueError) as exc:
        st.error(f"Nothing was queued: {escape_markdown(exc)}")
        return []
    st.success(
        f"Queued jobs {', '.join(map(str, ids))}: {_repeat_words(len(ids))}. Follow them on the Jobs page, "
        "then compare the new runs.",
        icon=":material/check_circle:",
    )
    st.page_link("views/jobs.py", label="Open the Jobs page", icon=":material/pending_actions:")
    return ids
