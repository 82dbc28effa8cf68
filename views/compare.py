"""Compare: 2 to 8 runs side by side (``?runs=1,2,3&baseline=1``): ratios, PM summary, overlaid CDFs, exports.

A predicted run (the serving simulator's) is named so everywhere here; beside a measured run it gets no verdict
but its check: the measured figure, the prediction, the error and whether it lies within the band."""

from __future__ import annotations

import streamlit as st

from engine.report.compare import compare_runs, comparison_frame, recipe_in_words
from engine.report.distributions import cdf_figure, latency_samples
from engine.report.export import CI_NOTE, comparison_csv, comparison_html, load_requests, permalink, runs_json
from engine.report.naming import default_baseline, frame_run_names, run_name, why_baseline
from engine.report.paired import accuracy_note
from engine.report.predicted import run_link
from engine.report.results import noise_words
from engine.report.runlike import is_predicted
from engine.report.verdict_words import VERDICT_NOTE
from engine.settings import get_settings
from ui.common import query_int, query_int_list
from ui.decision_view import render_decision
from ui.diagnostics_view import render_compare_findings
from ui.predicted_view import render_checks
from ui.run_view import cached_requests, cached_run, cached_runs_frame, missing_run, results_page, share_link
from ui.text import escape_markdown, shown

MAX_RUNS = 8
DISTRIBUTIONS = (("tpot_ms", "TPOT (GenAI-Perf/AIPerf: ITL)"), ("ttft_ms", "TTFT"), ("itl_ms", "ITL (AIPerf: ICL)"))


def _choose_runs(frame, ids: list[int]) -> list[int]:
    """A multiselect of runs that writes ``?runs=``; returns the chosen ids."""
    shown = frame.head(1000)
    labels = {
        int(run_id): f"{name}{'' if status == 'done' else f' ({status})'}"
        for run_id, name, status in zip(shown["run_id"], frame_run_names(shown), shown["status"], strict=True)
    }
    options = list(dict.fromkeys([*ids, *labels]))
    chosen = st.multiselect(
        "Runs to compare (2 to 8)",
        options,
        default=ids,
        max_selections=MAX_RUNS,
        format_func=lambda i: labels.get(int(i), f"{i} · (not found)"),
        key="compare_runs",
    )
    if chosen:
        st.query_params["runs"] = ",".join(map(str, chosen))
    elif "runs" in st.query_params:
        del st.query_params["runs"]
    return [int(i) for i in chosen]


def _downloads(db, runs, baseline_id: int) -> None:
    ids = [r.id for r in runs]
    params = {"runs": ",".join(map(str, ids)), "baseline": str(baseline_id)}
    link = permalink(get_settings().public_base_url, "compare", params)
    stem = "latencylab-compare-" + "-".join(map(str, ids))
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "HTML report",
        data=lambda: comparison_html(runs, load_requests(db, ids), baseline_id, link),
        file_name=f"{stem}.html",
        mime="text/html",
        icon=":material/download:",
    )
    c2.download_button(
        "CSV table",
        data=lambda: comparison_csv(runs, baseline_id, load_requests(db, ids)),
        file_name=f"{stem}.csv",
        mime="text/csv",
        icon=":material/download:",
    )
    c3.download_button(
        "JSON with raw stamps",
        data=lambda: runs_json(runs, load_requests(db, ids)),
        file_name=f"{stem}.json",
        mime="application/json",
        icon=":material/download:",
    )


def _linked_ids(db, token) -> list[int]:
    """The run ids in ``?runs=``, with a warning for each part that is not a stored run."""
    ids, bad = query_int_list("runs")
    if bad:
        st.warning(f"Ignoring {', '.join(shown(b) for b in bad)} in the link: run ids are whole numbers like 1,2,3.")
    if len(ids) > MAX_RUNS:
        st.warning(f"At most {MAX_RUNS} runs can be compared; showing the first {MAX_RUNS}.")
        ids = ids[:MAX_RUNS]
    missing = [i for i in ids if cached_run(db, db.url, i, token) is None]
    for run_id in missing:
        st.warning(missing_run(db, run_id))
    ids = [i for i in ids if i not in missing]
    return ids


def _trials_note(runs: list) -> str:
    """Whether drift between runs is in the intervals: only runs measured in several trials carry it."""
    counts = [len((r.metrics or {}).get("trials") or []) for r in runs]
    if all(c > 1 for c in counts):
        return " Every run here has several trials: the intervals include the spread across them. "
    return (
        " One-trial runs' intervals leave out drift between runs on a busy machine; measure with"
        " --trials 3 (or the decision preset) before calling a small difference real. "
    )


def _choose_baseline(ids: list[int], runs) -> int:
    """The baseline selectbox: ``?baseline=``, else the run at the engine's defaults (else the fewest changed
    knobs, else the oldest), said why; written back to the URL."""
    ids = [r.id for r in runs]
    chosen = default_baseline(runs)
    baseline_q, problem = query_int("baseline")
    if problem or (baseline_q is not None and baseline_q not in ids):
        st.warning(
            f"The baseline {shown(st.query_params.get('baseline'))} is not one of the compared runs; "
            f"using {escape_markdown(run_name(chosen))}."
        )
    default = baseline_q if baseline_q in ids else chosen.id
    if st.session_state.get("compare_baseline") not in ids:
        st.session_state.pop("compare_baseline", None)
    names = {r.id: run_name(r) for r in runs}
    baseline_id = st.selectbox(
        "Baseline (what the others are compared against)",
        ids,
        index=ids.index(default),
        key="compare_baseline",
        format_func=names.get,
    )
    if baseline_id == chosen.id and baseline_q not in ids:
        st.caption(f"Chosen because {why_baseline(chosen, runs)}; pick another run to compare against it instead.")
    st.query_params["baseline"] = str(baseline_id)
    return baseline_id


def _summary(comparison, runs) -> None:
    """The PM summary, a warning per run that differs in more than its recipe, and the recipes."""
    baseline_id = comparison.baseline_id
    st.subheader("Summary")
    st.markdown(f"Against the baseline, **{escape_markdown(comparison.labels[baseline_id])}**:")
    st.markdown("\n".join(f"- {escape_markdown(s)}" for s in comparison.summaries.values()))
    for run_id, diffs in comparison.differences.items():
        if diffs:
            st.warning(
                f"{escape_markdown(comparison.labels[run_id])} differs from the baseline in more than its recipe "
                f"({escape_markdown('; '.join(diffs))}): "
                "its ratios are not the recipe's alone.",
                icon=":material/warning:",
            )
    flagged = [
        f"- **{escape_markdown(comparison.labels[r.id])}**: {escape_markdown(words)}"
        for r in runs
        for words, _kind in noise_words(r.metrics)
    ]
    if flagged:
        st.warning("Noise flags (the figures may not stand):\n" + "\n".join(flagged), icon=":material/warning:")
    with st.expander("Recipes", expanded=False):
        for r in runs:
            st.markdown(
                f"- [run {r.id}]({run_link(r.id, is_predicted(r))}){' (predicted)' if is_predicted(r) else ''}"
                f"{' (baseline)' if r.id == baseline_id else ''}: "
                f"{escape_markdown(r.model)} · {escape_markdown(recipe_in_words(r.spec, r.engine))}"
            )


def _distributions(db, token, comparison, runs) -> None:
    st.subheader("Distributions")
    samples = {r.id: latency_samples(cached_requests(db, db.url, r.id, token)) for r in runs}
    tabs = st.tabs([label for _k, label in DISTRIBUTIONS])
    for tab, (key, _label) in zip(tabs, DISTRIBUTIONS, strict=True):
        with tab:
            series = {comparison.labels[r.id]: samples[r.id][key] for r in runs}
            st.plotly_chart(cdf_figure(series, key), key=f"cdf_{key}")


def main() -> None:
    opened = results_page("Compare")
    if opened is None:
        return
    db, token = opened
    ids = _linked_ids(db, token)
    frame = cached_runs_frame(db, db.url, token, ids=tuple(ids))  # the newest 1,000 and the linked runs
    if frame.empty:
        st.info("No runs yet. Run `python -m engine run --model demo` or launch one from the Launch page.")
        return
    ids = _choose_runs(frame, ids)
    runs = [r for r in (cached_run(db, db.url, i, token) for i in ids) if r is not None]
    if len(runs) < 2:
        st.info("Pick at least two runs to compare (or open a link like `compare?runs=1,2&baseline=1`).")
        share_link("compare")
        return
    baseline_id = _choose_baseline(ids, runs)
    requests = {r.id: cached_requests(db, db.url, r.id, token) for r in runs}
    comparison = compare_runs(runs, baseline_id, requests)  # raw samples: a bootstrap interval per ratio
    render_decision(db, comparison, runs)  # one line per run, and the repeats that would settle it
    render_checks(comparison)  # a prediction beside a measurement: figure by figure, its error and its band
    _summary(comparison, runs)
    st.subheader("Side by side")
    st.dataframe(  # many runs scroll sideways; the metric names stay in view
        comparison_frame(comparison, formatted=True),
        hide_index=True,
        column_config={"metric": st.column_config.TextColumn("metric", pinned=True)},
    )
    st.caption(
        "÷ baseline: the run's value divided by the baseline's (for latency, below 1 is faster), with its 95 % CI. "
        + VERDICT_NOTE
        + " "
        + CI_NOTE
        + _trials_note(runs)
        + accuracy_note(comparison.verdicts)
        + " "
        + "KL, top-1 and flips are measured against each run's reference recipe, not against the baseline run."
    )
    _distributions(db, token, comparison, runs)
    render_compare_findings(db, runs, requests)  # each run's findings side by side (ui/diagnostics_view.py)
    st.subheader("Export")
    _downloads(db, runs, baseline_id)
    share_link("compare")


main()
