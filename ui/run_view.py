"""Rendering of one run: headline cards, the metric table, config, provenance, error; a predicted run's banner
(ui/predicted_view.py) and its memory and load time said as not predicted."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from engine.measure import registry
from engine.measure.registry import GROUP_LABELS as LABELS
from engine.measure.registry import LATENCY_GROUPS, N_TOO_SMALL, STATS, failure_words, human_bytes
from engine.report.headline import Headline, run_schedule, ttft_headline
from engine.report.naming import run_name
from engine.report.predicted import NOT_PREDICTED
from engine.report.results import load_shared_words, result_object
from engine.report.runlike import is_predicted
from ui.predicted_view import not_predicted, render_banner
from ui.text import escape_markdown

CI_HELP = (
    "95 % confidence interval within this run: order statistics for percentiles, Student's t for means, "
    "a bootstrap over requests for throughput. 'n too small': too few samples for that percentile "
    "(p50 needs 6, p90 29, p95 59, p99 299). Run-to-run drift is not in a one-trial interval."
)


def _cell(stats: dict[str, Any], key: str) -> str:
    """``9.10 (8.90–9.30)``, ``9.10`` without an interval, ``n too small``, or ``-``."""
    if not (stats.get("supported") or {}).get(key, True):
        return N_TOO_SMALL
    value = registry.finite(stats.get(key))
    if value is None:
        return "-"
    span = registry.interval_text(registry.lookup("ttft_ms_p50"), (stats.get("ci") or {}).get(key))
    # a large value as its interval writes it (31,590, not 31590.3): thousands separated, no decimals
    number = f"{value:,.0f}" if abs(value) >= 1000 else registry.bare_number(registry.lookup("ttft_ms_p50"), value)
    return f"{number} ({span})" if span else number


def metric_table(obj: dict[str, Any], from_due: bool = False) -> pd.DataFrame:
    """One row per latency group (``TTFT [ms], n=16``): each statistic with its 95 % CI in brackets, "n too small";
    ``from_due``: latency from the due time too (a schedule that was not kept)."""
    rows = []
    due_groups = tuple(g for g in ("ttft_from_due_ms", "e2el_from_due_ms") if from_due and obj.get(g))
    for group in LATENCY_GROUPS + due_groups:
        stats = obj.get(group) or {}
        n = stats.get("n")
        name = f"{LABELS[group]} [ms]" + ("" if n is None else f", n={n}")
        rows.append({"metric": name, **{k: _cell(stats, k) for k in STATS}})
    return pd.DataFrame(rows)


def _card(obj: dict[str, Any], group: str, stat: str = "p50") -> tuple[str, str | None]:
    """(value, its CI line) of a latency card: ``58.4 ms`` and ``95 % CI 54.0–64.9``, or "n too small"."""
    stats = obj.get(group) or {}
    if not (stats.get("supported") or {}).get(stat, True):
        return N_TOO_SMALL, f"n={stats.get('n')}"
    metric = registry.lookup(f"{group}_{stat}")
    span = registry.interval_text(metric, (stats.get("ci") or {}).get(stat))
    return metric.format(registry.finite(stats.get(stat))), (f"95 % CI {span}" if span else None)


def _scalar_card(obj: dict[str, Any], key: str) -> tuple[str, str | None]:
    metric = registry.lookup(key)
    span = registry.interval_text(metric, (obj.get("ci") or {}).get(key))
    return f"{obj.get(key) or 0:,.1f}", (f"95 % CI {span}" if span else None)


def _resources(obj: dict[str, Any]) -> list[tuple[str, str, str | None, str | None]]:
    """The memory and load-time cards; a predicted run's say "not predicted" (the simulator predicts none of them)."""
    if obj.get("predicted"):
        return [
            (label, "not predicted", None, NOT_PREDICTED) for label in ("Peak memory", "Weights memory", "Load time")
        ]
    return [
        ("Peak memory", human_bytes(obj.get("peak_memory_bytes")), None, obj.get("peak_memory_kind") or "peak memory"),
        ("Weights memory", human_bytes(obj.get("weights_memory_bytes")), None, "parameters and buffers as loaded"),
        ("Load time", f"{obj.get('load_s') or 0:,.1f} s", None, load_shared_words(obj)),
    ]


def _headline(obj: dict[str, Any], due: Headline | None = None) -> None:
    """The headline cards (with their 95 % CI under the value); TTFT from the due time first when the schedule was
    not kept (``due``, with why); a warning when a request failed."""
    rate = obj.get("error_rate")
    total = (obj.get("completed") or 0) + (obj.get("failed") or 0)
    ttft = (due.label, due.value, due.under, CI_HELP) if due else ("TTFT p50", *_card(obj, "ttft_ms"), CI_HELP)
    speed = [
        ttft,
        ("TPOT p50", *_card(obj, "tpot_ms"), "GenAI-Perf/AIPerf call this ITL. " + CI_HELP),
        ("Output tokens/s", *_scalar_card(obj, "output_tokens_per_s"), CI_HELP),
        ("Failed requests", "-" if rate is None else f"{rate:.0%}", None, f"{obj.get('failed')} of {total} measured"),
    ]
    for row in (speed, _resources(obj)):  # two rows of four, so no value is cut off on a laptop screen
        for col, (label, value, ci, help_text) in zip(st.columns(4), row, strict=False):
            col.metric(label, value, delta=ci, delta_color="off", delta_arrow="off", help=help_text)
    if due is not None and due.note:
        st.warning(escape_markdown(due.note), icon=":material/schedule:")
    failed = failure_words(obj)
    if failed:
        st.warning(
            f"{failed}: the latency and throughput figures cover the completed requests only"
            + (f" ({escape_markdown(obj['error'])})" if obj.get("error") else "."),
            icon=":material/warning:",
        )


def render_run(run: Any, requests: list[Any] | None = None, agg: Any | None = None) -> None:
    """Show one stored run (a RunDetail from storage); its raw ``requests`` give older runs their intervals, its
    aggregates (``agg``) their schedule."""
    obj = result_object(run, requests)
    due = ttft_headline(obj, run_schedule(run, agg), run.engine) if run.status == "done" else None
    where = escape_markdown(run.device_name or run.device)
    st.subheader(escape_markdown(run_name(run)))  # the run's number, the user's name, its recipe in words
    st.caption(
        f"{escape_markdown(run.model)} {'predicted on' if is_predicted(run) else 'on'} {where} · "
        f"{escape_markdown(run.engine)} · {run.created_at:%Y-%m-%d %H:%M UTC} · fingerprint {run.fingerprint}"
    )
    render_banner(run)  # a predicted run: predicted, not measured; its calibration, band, hardware and TP
    if run.status != "done":
        st.error(f"This run {run.status}: {escape_markdown(run.error or 'no reason recorded')}")
    else:
        _headline(obj, due)
        st.dataframe(metric_table(obj, from_due=due is not None), hide_index=True, width="stretch")
        st.caption(
            f"ms, with the 95 % CI in brackets; n too small: too few samples for that percentile. "
            f"{obj.get('completed')} requests measured, {obj.get('failed')} failed, "
            f"{obj.get('warmup_excluded')} warm-up excluded; {_with_ci(obj, 'requests_per_s')}; "
            f"{_with_ci(obj, 'tokens_per_s_per_user')}"
        )
    note = (run.provenance or {}).get("context_note")  # the server's context was unknown: nothing was clipped
    if note:
        st.caption(f"Context: {escape_markdown(note)}.")
    if run.status == "done" and is_predicted(run):
        not_predicted("Accuracy")
    elif run.status == "done":
        from ui.accuracy_view import render_accuracy

        render_accuracy(run)
    with st.expander("Config", expanded=False):
        st.code(json.dumps(run.spec, indent=2, sort_keys=True), language="json")
    _where(run)
    with st.expander("Provenance", expanded=False):
        st.json(run.provenance)


def _where(run: Any) -> None:
    """Where the run's job ran (its provenance's placement), linked to the Ray dashboard where one is configured."""
    from engine.jobs import placement
    from engine.settings import get_settings

    where = (run.provenance or {}).get("placement")
    words = placement.in_words(where)
    if words:
        link = placement.dashboard_link(where, get_settings().ray_dashboard_url)
        st.caption(f"Ran on {escape_markdown(words)}" + (f" · [Ray dashboard]({link})" if link else ""))


DISTRIBUTIONS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT (GenAI-Perf/AIPerf: ITL)"), ("itl_ms", "ITL (AIPerf: ICL)"))


def distributions_section(run: Any, agg: Any) -> None:
    """Small-sample warnings, then a tab per latency group (CDF and histogram) and the per-request timeline,
    drawn from the run's aggregates (``engine.measure.aggregates``)."""
    if run.status != "done" or agg is None:
        return
    from engine.report.distributions import (
        cdf_figure,
        histogram_figure,
        latency_samples_of,
        small_sample_warnings,
        timeline_of,
    )

    samples = latency_samples_of(agg)
    counts = {k: range(len(samples[k]) if k != "itl_ms" else samples[k]["n"]) for k, _label in DISTRIBUTIONS}
    st.subheader("Distributions")
    warnings = small_sample_warnings(counts)
    if warnings:
        st.warning("Small samples:\n" + "\n".join(f"- {escape_markdown(w)}" for w in warnings), icon=":material/info:")
    tabs = st.tabs([label.split(" (")[0] for _k, label in DISTRIBUTIONS] + ["Timeline"])
    for tab, (key, label) in zip(tabs, DISTRIBUTIONS, strict=False):
        with tab:
            if not len(counts[key]):
                st.info(f"No {label} samples (e.g. requests with a single output token have no TPOT).")
                continue
            left, right = st.columns(2)
            left.plotly_chart(cdf_figure({f"run {run.id}": samples[key]}, key), key=f"cdf_{key}")
            hist = samples["itl_hist"] if key == "itl_ms" else samples[key]
            right.plotly_chart(histogram_figure(hist, key), key=f"hist_{key}")
    with tabs[-1]:
        st.plotly_chart(timeline_of(agg), key="timeline")
        st.caption("Grey: queued (due → sent); orange: sent → first token; blue: first → last token.")


def over_time_section(run: Any, agg: Any) -> None:
    """Output tokens/s in 1 s windows, requests in flight, TTFT and ITL over the run (from its aggregates)."""
    if run.status != "done" or agg is None or not len(agg):
        return
    from engine.report.timeseries import over_time_figure

    st.plotly_chart(over_time_figure(agg), key="timeseries", width="stretch")
    st.caption(
        "Measured requests only (warm-up left out); time from the first measured send. TTFT: one point per "
        "request at its send time; ITL: one point per token gap; black: rolling median (the median per time bin "
        "where the panel's title says it shows a sample). Dotted lines: a new trial."
    )


def tokens_section(run: Any, agg: Any) -> None:
    """Prompt and output tokens per request against what the workload asked for."""
    if run.status != "done" or agg is None or not len(agg):
        return
    from engine.report.distributions import Requested, token_figure_of

    st.plotly_chart(token_figure_of(agg, Requested.from_spec(run.spec)), key="tokens", width="stretch")


def _with_ci(obj: dict[str, Any], key: str) -> str:
    """``tokens/s per user 99.4 (95 % CI 97.9–101)``."""
    metric = registry.lookup(key)
    return f"{metric.label.split(' (')[0]} " + registry.format_with_ci(
        metric, obj.get(key), (obj.get("ci") or {}).get(key)
    )


# -- cached queries (keyed by a cheap "runs changed" token) and permalinks ---------------
def results_page(title: str | None) -> tuple[Any, tuple[int, int]] | None:
    """A results page's head: its title (None: the page says it later), then (database, runs-changed token); None
    when there is no database."""
    from ui.common import database

    if title is not None:
        st.title(title)
    db = database()
    return None if db is None else (db, runs_changed_token(db))


def runs_changed_token(db: Any) -> tuple[int, int]:
    """(number of runs, highest id): changes whenever a run is stored or deleted."""
    from storage.runs import runs_token

    return runs_token(db)


@st.cache_data(show_spinner=False, max_entries=8, ttl=3600)
def cached_runs_frame(
    _db: Any, db_url: str, token: tuple[int, int], limit: int | None = 1000, ids: tuple[int, ...] = ()
) -> pd.DataFrame:
    """The newest ``limit`` measured runs (identity columns only: enough for a picker), plus the runs ``ids`` names
    however old, predicted ones too (a link names them on purpose); cached per database and runs-changed token.
    Paged in SQL: fast at 100,000 runs."""
    from storage.frames import RunQuery, query_frame

    newest = query_frame(_db, RunQuery(limit=limit), metrics=[])
    if not ids:
        return newest
    linked = query_frame(_db, RunQuery(run_ids=tuple(ids), predicted=None), metrics=[])
    return pd.concat([linked, newest], ignore_index=True).drop_duplicates("run_id")


def missing_run(db: Any, run_id: int) -> str:
    """Why run ``run_id`` cannot be shown: stored but unreadable (and why), or not stored at all."""
    from storage.runs import unreadable_reason

    reason = unreadable_reason(db, run_id)
    if reason:
        return f"Run {run_id} is stored, but {escape_markdown(reason)}; the other runs are not affected."
    return f"There is no run {run_id}. It may have been deleted, or the link is from another database."


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def cached_run(_db: Any, db_url: str, run_id: int, token: tuple[int, int]) -> Any:
    """storage.runs.get_run, cached (None when there is no such run)."""
    from storage.runs import get_run

    return get_run(_db, run_id)


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def cached_requests(_db: Any, db_url: str, run_id: int, token: tuple[int, int]) -> list[Any]:
    """storage.runs.get_requests (raw stamps), cached."""
    from storage.runs import get_requests

    return get_requests(_db, run_id)


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def cached_aggregates(_db: Any, db_url: str, run_id: int, token: tuple[int, int]) -> Any:
    """The run's aggregates (``engine.measure.aggregates``): stored with it, else made from its requests (runs
    stored before them); cached. The Run page draws from them, never from every stamp."""
    from engine.measure.aggregates import KIND, Aggregates, summarise
    from storage.series import get_series

    stored = Aggregates.from_json(get_series(_db, run_id, KIND))
    if stored is not None:
        return stored
    from storage.runs import get_requests

    return summarise(get_requests(_db, run_id))


@st.cache_resource(show_spinner=False, max_entries=4, ttl=3600)
def cached_endpoints(_db: Any, db_url: str, run_id: int, token: tuple[int, int], _agg: Any) -> list[Any]:
    """The run's requests with only their first and last stamps (from its aggregates), shared, not copied:
    what the per-request diagnostics read. Nothing may change them."""
    return _agg.endpoint_records()


def current_params() -> dict[str, Any]:
    """The page's query parameters; repeated keys as lists."""
    out: dict[str, Any] = {}
    for key in st.query_params:
        values = st.query_params.get_all(key)
        out[key] = values if len(values) > 1 else (values[0] if values else "")
    return out


def share_link(url_path: str) -> str:
    """Show a "Copy link" box with the full URL of this view (public base URL + path + query)."""
    from engine.report.export import permalink
    from engine.settings import get_settings

    url = permalink(get_settings().public_base_url, url_path, current_params())
    with st.container():
        st.caption(":material/link: Copy link to this view (the copy icon copies it)")
        st.code(url, language=None, wrap_lines=True)
    return url
