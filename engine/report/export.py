"""Exports: a self-contained HTML report (plotly inlined, no server), CSV tables, JSON with raw stamps.

The builders take runs and records, not a database, so they are pure; ``load_runs``
fetches what they need from storage for the CLI and the pages. Predicted runs (the serving simulator's) are
titled as such: named "predicted on <hardware>", counted in the report's title, their calibration and band in the
environment table, their check against a measured run in its own section; the CSV carries ``#N predicted``, the
band and the label, the JSON each run's ``predicted``, ``band``, ``prediction`` and a ``link`` that says it. The Explore report is
:mod:`engine.report.explore_report`; what every report shares, :mod:`engine.report.report_html`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pandas as pd

from engine.measure.records import RequestRecord
from engine.report.compare import Comparison, compare_runs, comparison_frame, recipe_in_words
from engine.report.distributions import cdf_figure, latency_samples
from engine.report.explore_report import explore_html  # noqa: F401 - the pages and the CLI export it from here
from engine.report.paired import accuracy_note
from engine.report.predicted import band_words, check_frame, prediction_of, run_link, within_words
from engine.report.report_html import decision_html, figures_html, meta, noise_html, page
from engine.report.results import result_object
from engine.report.runlike import is_predicted
from engine.report.timeseries import throughput_overlay
from engine.report.verdict_words import VERDICT_NOTE
from engine.spec import engines

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from storage import Database
    from storage.runs import RunDetail

REPORT_CDF_POINTS = 150  # order statistics per CDF line in a report: 8 runs stay well under 5 MB

CI_NOTE = (
    "95 % CI: the figure's confidence interval within its run (order statistics for percentiles, bootstrap "
    "over requests for throughput). n too small: the run has too few requests for that percentile (p50 needs 6, "
    "p90 29, p95 59, p99 299)."
)


def permalink(base_url: str, url_path: str, params: Mapping[str, object]) -> str:
    """``base_url/url_path?params`` with list values repeated (``?model=a&model=b``); empty values dropped."""
    clean: list[tuple[str, str]] = []
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        clean += [(key, str(v)) for v in values if v is not None and str(v) != ""]
    url = base_url.rstrip("/") + "/" + url_path.strip("/")
    return url + ("?" + urlencode(clean) if clean else "")


def load_runs(db: Database, run_ids: Sequence[int]) -> tuple[list[RunDetail], list[int]]:
    """The stored runs for ``run_ids`` in order, and the ids that do not exist."""
    from storage.runs import get_run

    found, missing = [], []
    for run_id in run_ids:
        run = get_run(db, run_id)
        (found if run is not None else missing).append(run if run is not None else run_id)
    return found, missing


def load_requests(db: Database, run_ids: Sequence[int]) -> dict[int, list[RequestRecord]]:
    """Raw per-request stamps for each run id."""
    from storage.runs import get_requests

    return {run_id: get_requests(db, run_id) for run_id in run_ids}


def environment_frame(runs: Sequence[RunDetail]) -> pd.DataFrame:
    """One row per run: where and when it ran, on what software, and who ran it (run provenance)."""
    rows = []
    for r in runs:
        prov = r.provenance or {}
        packages = prov.get("packages") or {}
        versions = ", ".join(f"{k} {packages[k]}" for k in engines.packages(versions_only=True) if k in packages)
        rows.append(
            {
                "run": r.id,
                "kind": _kind(r),
                "date": f"{r.created_at:%Y-%m-%d %H:%M} UTC" if getattr(r, "created_at", None) else "",
                "run by": getattr(r, "submitted_by", None) or "not recorded",
                "device": r.device_name or prov.get("device_name") or r.device,
                "engine": r.engine,
                "host": prov.get("host") or "",
                "CPU": " ".join(str(v) for v in (prov.get("cpu"), _cores(prov.get("cpu_count"))) if v),
                "Python": prov.get("python") or "",
                "versions": versions,
                "git commit": prov.get("git_commit") or "",
            }
        )
    return pd.DataFrame(rows)


def _kind(run: RunDetail) -> str:
    """``measured``, or ``PREDICTED: <calibration label>; <band>``."""
    if not is_predicted(run):
        return "measured"
    prediction = prediction_of(run)
    return f"PREDICTED: {prediction.get('label') or 'no calibration label'}; {band_words(prediction)}"


def _checks_html(comparison: Comparison) -> str:
    """Each prediction against the measured run it is compared with (engine/report/predicted.py), as on Compare."""
    parts = [
        f"<h3>{html.escape(pair.heading())}: {html.escape(within_words(pair.checks))}</h3>"
        + check_frame(pair).to_html(index=False, escape=True, border=0)
        for pair in comparison.predictions.values()
    ]
    if not parts:
        return ""
    note = (
        "Error: the predicted figure divided by the measured one, less 1; band: the leave-one-out median error the "
        "calibration claims for that figure. A simulation has no sampling noise: no significance test applies."
    )
    return f'<h2>Prediction against measurement</h2>{"".join(parts)}<p class="meta">{html.escape(note)}</p>'


def _title(comparison: Comparison) -> str:
    """``LatencyLab comparison: runs 4, 5 (run 5 predicted, not measured)``."""
    predicted = [str(i) for i in comparison.run_ids if i in comparison.predicted]
    ids = ", ".join(str(i) for i in comparison.run_ids)
    if not predicted:
        return f"LatencyLab comparison: runs {ids}"
    which = f"run{'s' if len(predicted) > 1 else ''} {', '.join(predicted)}"
    return f"LatencyLab comparison: runs {ids} ({which} predicted, not measured)"


def _cores(count: object) -> str:
    return f"({count} cores)" if count else ""


def _report_figures(
    runs: Sequence[RunDetail], labels: Mapping[int, str], requests_by_id: Mapping[int, Sequence[RequestRecord]]
) -> list[go.Figure]:
    """The report's charts: TTFT, TPOT and ITL CDFs (thinned) and output tokens/s over the run."""
    names = {r.id: f"#{r.id} {labels[r.id]}" for r in runs}
    samples = {r.id: latency_samples(requests_by_id.get(r.id, [])) for r in runs}
    figures = [
        cdf_figure({names[r.id]: samples[r.id][metric] for r in runs}, metric, max_points=REPORT_CDF_POINTS)
        for metric in ("ttft_ms", "tpot_ms", "itl_ms")
    ]
    figures.append(throughput_overlay({names[r.id]: requests_by_id.get(r.id, []) for r in runs}))
    return figures


def comparison_html(
    runs: Sequence[RunDetail],
    requests_by_id: Mapping[int, Sequence[RequestRecord]],
    baseline_id: int | None = None,
    link: str | None = None,
) -> str:
    """A self-contained HTML report of a comparison, in the order a reader needs it: the decision line per
    run, the PM summary, the recipes and noise flags in words, the environment (hardware, versions, date,
    who ran it), charts, then the metric table."""
    comparison = compare_runs(list(runs), baseline_id, requests_by_id)
    by_id = {r.id: r for r in runs}
    base = by_id[comparison.baseline_id]
    title = _title(comparison)
    summary = "".join(f"<li>{html.escape(s)}</li>" for s in comparison.summaries.values())
    recipes = "".join(
        f"<li><b>{html.escape(comparison.labels[r.id])}</b>{' (baseline)' if r.id == base.id else ''}"
        f"{' (predicted, not measured)' if is_predicted(r) else ''}: "
        f"{html.escape(r.model)} · {html.escape(recipe_in_words(r.spec, r.engine))}</li>"
        for r in runs
    )
    table = comparison_frame(comparison, formatted=True).to_html(index=False, escape=True, border=0)
    environment = environment_frame(runs).to_html(index=False, escape=True, border=0)
    figures = _report_figures(runs, comparison.labels, requests_by_id)
    decisions = decision_html(
        [d.text for d in comparison.decisions.values()], f"Decision (against {comparison.labels[base.id]})"
    )
    ratio = "÷ baseline: the run's value divided by the baseline's, with the 95 % CI of that ratio."
    notes = " ".join((ratio, CI_NOTE, VERDICT_NOTE, accuracy_note(comparison.verdicts)))
    body = (
        f"<h1>{html.escape(title)}</h1>{meta(link)}{decisions}{_checks_html(comparison)}"
        f"<h2>Summary (baseline: {html.escape(comparison.labels[base.id])})</h2>"
        f'<ul class="summary">{summary or "<li>Only the baseline was given.</li>"}</ul>'
        f"<h3>Recipes</h3><ul>{recipes}</ul>{noise_html(runs, comparison.labels)}"
        f"<h2>Environment</h2>{environment}"
        f"<h2>Charts</h2>{figures_html(figures)}"
        f'<h2>Metrics</h2>{table}<p class="meta">{html.escape(notes)}</p>'
    )
    return page(title, body)


def table_csv(frame: pd.DataFrame) -> str:
    """A DataFrame as CSV text (no index)."""
    return frame.to_csv(index=False)


def comparison_csv(
    runs: Sequence[RunDetail],
    baseline_id: int | None = None,
    requests_by_id: Mapping[int, Sequence[RequestRecord]] | None = None,
) -> str:
    """The comparison table as CSV: numbers, CI bounds, ratios, their bounds and verdict states.

    A percentile the sample cannot support has an empty value (and CI); with ``requests_by_id``
    the ratios' intervals come from the raw samples, else from the stored intervals.
    """
    return table_csv(comparison_frame(compare_runs(list(runs), baseline_id, requests_by_id), formatted=False))


def runs_json(runs: Sequence[RunDetail], requests_by_id: Mapping[int, Sequence[RequestRecord]]) -> str:
    """A JSON array: each run's result object (with intervals; ``predicted``, ``band`` and ``prediction`` for a
    predicted run), its ``link`` (``run?run=N``, ``&predicted=1`` for a predicted run) and ``requests`` with every
    raw stamp."""
    out = []
    for run in runs:
        obj = result_object(run, requests_by_id.get(run.id))
        obj["link"] = run_link(run.id, is_predicted(run))  # relative to the app: run?run=N, &predicted=1 for one
        obj["requests"] = [asdict(r) for r in requests_by_id.get(run.id, [])]
        out.append(obj)
    return json.dumps(out, indent=2, default=str)
