"""History: one spec fingerprint (or suite entry) over time (``?fingerprint=...&metric=...`` or
``?suite=NAME&entry=NAME``): the metric with its 95 % bands and change points, each marked with what changed."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.jobs.suites import entry_fingerprints
from engine.measure import registry
from engine.report.history import (
    MIN_SEGMENT,
    build_history,
    fingerprint_runs,
    history_figure,
    measured_metrics,
    metric_choices,
)
from engine.report.listing import plural
from engine.report.naming import changes_in_words, short_model, workload_title
from storage.suites import fingerprints
from ui.run_view import results_page, share_link
from ui.text import escape_markdown, shown

DEFAULT_METRIC = "tpot_ms_p50"
UNKNOWN = "\x00unknown"  # a linked fingerprint that is not stored: nothing is picked for the user


def _linked_fingerprint(db, known: dict[str, str]) -> str | None:
    """The fingerprint of ``?suite=&entry=`` or ``?fingerprint=``, with a warning when the link names nothing stored."""
    suite, entry = st.query_params.get("suite"), st.query_params.get("entry")
    if suite and entry:
        fp = entry_fingerprints(db).get((suite, entry))
        if fp is None:
            st.warning(f"There is no entry {shown(entry)} in a stored suite {shown(suite)}; pick a series below.")
            return UNKNOWN
        return fp
    fp = st.query_params.get("fingerprint")
    if fp and fp not in known:
        st.warning(
            f"No finished run has the fingerprint {shown(fp)} (deleted, or the link is from another database); "
            "pick a series below."
        )
        return UNKNOWN
    return fp or None


def series_label(info, entry: str | None = None) -> str:
    """A series in words: its suite entry or name, its recipe and workload, model, engine, how many runs."""
    knobs = info.knobs or {}
    recipe = changes_in_words(knobs.get("recipe"), info.engine)
    what = " · ".join(p for p in (entry, info.name, recipe) if p)
    runs = f"{info.runs} run{'' if info.runs == 1 else 's'}"
    return f"{what} · {workload_title(knobs.get('workload'))} · {short_model(info.model)} · {runs} · {info.fingerprint[:8]}"


def _choose_fingerprint(db, current: str | None) -> str | None:
    """A selectbox of the stored fingerprints (and suite entries); writes ``?fingerprint=``. A link to a
    fingerprint that is not stored keeps the link and asks for a pick instead of showing another series."""
    infos = fingerprints(db)
    if not infos:
        return None
    entries = {fp: f"{s}/{e}" for (s, e), fp in entry_fingerprints(db).items()}
    labels = {f.fingerprint: series_label(f, entries.get(f.fingerprint)) for f in infos}
    options = list(labels)
    if st.session_state.get("history_fingerprint") not in labels:
        st.session_state.pop("history_fingerprint", None)
    chosen = st.selectbox(
        "Series (runs of one spec)",
        options,
        index=None if current == UNKNOWN else options.index(current) if current in labels else 0,
        format_func=lambda fp: labels[fp],
        key="history_fingerprint",
        placeholder="pick a series",
    )
    if chosen is None:
        return None
    if chosen != current:
        for key in ("suite", "entry"):
            st.query_params.pop(key, None)
    st.query_params["fingerprint"] = chosen
    return chosen


def _choose_metric(runs) -> str:
    choices = metric_choices(runs) or [DEFAULT_METRIC]
    wanted = registry.canonical(st.query_params.get("metric") or DEFAULT_METRIC)  # older links: tpot_ms.p50
    if wanted not in choices:
        if "metric" in st.query_params:
            st.warning(f"{shown(wanted)} is not measured in these runs; showing {escape_markdown(choices[0])}.")
        wanted = choices[0]
    hints = {k: v for r in runs for k, v in registry.task_kinds(r.quality).items()}
    measured = measured_metrics(runs)
    metric = st.selectbox(
        "Metric",
        choices,
        index=choices.index(wanted),
        format_func=lambda k: (
            registry.lookup(k, hints.get(k)).header + ("" if k in measured else " (not measured yet)")
        ),
        key="history_metric",
    )
    st.query_params["metric"] = metric
    return metric


def _change_points(h) -> None:
    st.subheader("Change points")
    if len(h.points) < 2 * MIN_SEGMENT:
        st.markdown(
            f"Too few runs to look for a change: {plural(len(h.points), 'run')} of this spec so far; change points "
            f"need at least {2 * MIN_SEGMENT} (segments of at least {MIN_SEGMENT} runs)."
        )
        return
    if not h.change_points:
        st.markdown("No change point: the series holds one level (ruptures PELT, segments of at least 2 runs).")
        return
    st.markdown("\n".join(f"- **{c.at:%Y-%m-%d %H:%M}**: {c.words()}" for c in h.change_points))


def _table(h, metric: str) -> None:
    m = registry.lookup(metric)
    rows = [
        {
            "run": f"run?run={p.run_id}",
            "time": p.at,
            h.label: m.format(p.value),
            "95 % interval": "–" if p.band is None else f"{m.format(p.band[0])} – {m.format(p.band[1])}",
        }
        for p in reversed(h.points)
    ]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        column_config={"run": st.column_config.LinkColumn("run", display_text=r"run\?run=(\d+)")},
    )


def main() -> None:
    opened = results_page("History")
    if opened is None:
        return
    db, _token = opened
    known = {f.fingerprint: f for f in fingerprints(db)}
    linked = _linked_fingerprint(db, known)
    fp = _choose_fingerprint(db, linked)
    if fp is None:
        if known:
            st.info("Pick a series above to draw its history.")
        else:
            st.info("No finished runs yet. Queue a suite (`python -m engine suite run suites/demo.yaml`) or run one.")
        return
    runs = fingerprint_runs(db, fp)
    metric = _choose_metric(runs)
    h = build_history(fp, metric, runs)
    if not h.points:
        st.info(
            f"No run of this series measured {escape_markdown(h.label)}: launch the same spec with accuracy "
            "(Launch: Accuracy of the same recipe; `python -m engine run --quality ppl,fidelity`) to follow it here."
        )
        share_link("history")
        return
    if not h.has_bands:
        st.caption("No stored 95 % intervals for these runs (older runs, or too few requests): points only.")
    info = known[fp]
    words = " · ".join(p for p in (info.name, changes_in_words((info.knobs or {}).get("recipe"), info.engine)) if p)
    st.plotly_chart(history_figure(h, words), key="history_chart")
    _change_points(h)
    with st.expander(f"Runs ({len(h.points)})", expanded=False):
        _table(h, metric)
    share_link("history")


main()
