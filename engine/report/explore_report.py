"""The Explore report a PM forwards: a report, not a table dump.

In the order a receiver reads it: what was plotted and where it came from (a link they can open, or one
said to be local); the decision line of each front run against its group's baseline (the run at its
engine's defaults, else the fewest changed knobs, else the oldest: :func:`engine.report.naming.default_baseline`),
by the one verdict; the scatter with its fronts (legend below the plot); the front's runs by their recipe
in words, with both figures and their 95 % CI and how each stands on the front; the noise flags in words;
the notes on intervals and verdicts. No run ids, timestamps, field names or empty cells. Predicted runs in the
frame (the serving simulator's) are drawn hollow and listed apart, titled as predictions with their calibration
and band, never on a front nor in a decision line.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pandas as pd

from engine.jsonvalue import JSONMapping
from engine.measure import registry
from engine.report.decision import decision_line
from engine.report.figures import explore_scatter, figure_words, frame_hints, metric_name
from engine.report.fronts import Fronts, front_groups, pareto_fronts, split_predicted
from engine.report.listing import plural
from engine.report.naming import default_baseline, frame_run_names
from engine.report.report_html import decision_html, figures_html, meta, noise_html, page
from engine.report.verdict_words import NOT_SEPARATED, TIED, VERDICT_NOTE

if TYPE_CHECKING:
    from engine.report.runlike import RunLike

CI_WORDS = (
    "95 % CI: each figure's confidence interval within its run (order statistics for percentiles, bootstrap over "
    "requests for throughput, ± 1.96 standard errors for accuracy)."
)
PAIRED_WORDS = (
    " A run's own perplexity interval is the sampling of the scored text; runs that scored the same text are "
    "compared paired (the same blocks of text), which is many times narrower: the verdicts use that."
)
Record = tuple[JSONMapping, JSONMapping]


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


def _runs(rows: pd.DataFrame, records: Mapping[int, Record], names: Mapping[int, str]) -> dict[int, RunLike]:
    """Run-like objects (what the verdicts and naming read) from a frame's rows and their stored records."""
    knob_cols = [c for c in rows.columns if c.startswith("recipe.")]
    out: dict[int, RunLike] = {}
    for _, row in rows.iterrows():
        run_id = int(row["run_id"])
        recipe = {c.removeprefix("recipe."): row[c] for c in knob_cols if _present(row[c])}
        recipe = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in recipe.items()}
        metrics, quality = records.get(run_id, ({}, {}))
        out[run_id] = SimpleNamespace(
            id=run_id, status="done", name=names.get(run_id), engine=row.get("engine"), metrics=metrics,
            quality=quality, spec={"recipe": {**recipe, "engine": row.get("engine")}}, created_at=row.get("created_at"),
        )  # fmt: skip
    return out


def _decision_lines(frame: pd.DataFrame, fronts: Fronts, records: Mapping[int, Record] | None) -> list[str]:
    """Each front run's decision line against its group's baseline (module doc); none without records."""
    if not records or frame.empty:
        return []
    names = dict(zip(frame["run_id"].astype(int), frame_run_names(frame), strict=True))
    groups = front_groups(frame)
    lines = []
    for group, ids in fronts.groups.items():
        runs = _runs(frame[groups == group], records, names)
        base = default_baseline(list(runs.values()))
        where = f" [{fronts.labels.get(group, group)}, against {names[base.id]}]" if len(fronts.groups) > 1 else ""
        lines += [decision_line(runs[i], base, label=names[i]).text + where for i in ids if i != base.id]
    return lines


def standing(run_id: int, fronts: Fronts) -> str:
    """How a front run stands, in words: tied, not told apart, a trade-off, or the only run of its group."""
    if any(run_id in ids for ids in fronts.unclear.values()):
        return NOT_SEPARATED
    if any(run_id in ids for ids in fronts.tied.values()):
        return TIED
    if any(ids == [run_id] for ids in fronts.groups.values()):
        return "the only run on its front (model and workload)"
    return "a trade-off: significantly different on both axes"


def _front_table(frame: pd.DataFrame, fronts: Fronts, x: str, y: str) -> str:
    """The front's runs in words: name, standing, group, both figures with their CI, failed requests."""
    front = fronts.run_ids()
    rows = frame[frame["run_id"].isin(front)].sort_values(x)
    if rows.empty:
        return "<p>No run has both figures.</p>"
    hints = frame_hints(frame)
    table = pd.DataFrame(
        {"run": frame_run_names(rows), "on the front": [standing(int(i), fronts) for i in rows["run_id"]]}
    )
    if len(fronts.groups) > 1:
        table["model · workload"] = [fronts.labels.get(g, g) for g in front_groups(rows)]
    table[metric_name(x, hints)] = figure_words(rows, x, hints, labelled=False)
    table[metric_name(y, hints)] = figure_words(rows, y, hints, labelled=False)
    if "error_rate" in rows.columns:
        table["failed requests"] = [
            registry.lookup("error_rate").format(registry.finite(v)) for v in rows["error_rate"]
        ]
    return table.to_html(index=False, escape=True, border=0)


def _predicted_html(predicted: pd.DataFrame, x: str, y: str) -> str:
    """The predicted runs drawn (hollow diamonds): each by name, both figures, its calibration and band."""
    if predicted.empty:
        return ""
    hints = frame_hints(predicted)
    table = pd.DataFrame({"predicted run": frame_run_names(predicted)})
    table[metric_name(x, hints)] = figure_words(predicted, x, hints, labelled=False)
    table[metric_name(y, hints)] = figure_words(predicted, y, hints, labelled=False)
    for column in ("prediction", "band"):
        if column in predicted.columns:
            table[column] = predicted[column].fillna("").tolist()
    return (
        f"<h2>Predicted runs ({len(predicted)}): not measured</h2><p>The serving simulator's predictions, drawn as "
        "hollow diamonds: never on a front, never in a decision line.</p>"
        + table.to_html(index=False, escape=True, border=0)
    )


def _plotted(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return frame.iloc[0:0]
    return frame[pd.to_numeric(frame[x], errors="coerce").notna() & pd.to_numeric(frame[y], errors="coerce").notna()]


def explore_html(
    frame: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    symbol: str | None = None,
    link: str | None = None,
    records: Mapping[int, Record] | None = None,
    fronts: Fronts | None = None,
) -> str:
    """A self-contained HTML report of an Explore view (module doc); ``records`` (each run's stored
    (metrics, quality)) give the verdicts and decision lines, as on the page."""
    hints = frame_hints(frame)
    if fronts is None:
        fronts = pareto_fronts(frame, x, y, hints, records=records)
    fig = explore_scatter(frame, x, y, color, symbol, fronts=fronts)
    plotted, predicted = split_predicted(_plotted(frame, x, y))
    title = f"LatencyLab: {metric_name(y, hints)} against {metric_name(x, hints)}"
    front = fronts.run_ids()
    names = dict(zip(plotted["run_id"].astype(int), frame_run_names(plotted), strict=True)) if len(plotted) else {}
    several = len(fronts.groups) > 1
    shown = [SimpleNamespace(id=i, metrics=(records or {}).get(i, ({}, {}))[0]) for i in front]
    lines = _decision_lines(plotted, fronts, records)
    groups = (
        f" in {plural(len(fronts.groups), 'group')} ({html.escape('; '.join(fronts.differences))})" if several else ""
    )
    apart = f"; {plural(len(predicted), 'predicted run')} drawn apart" if len(predicted) else ""
    body = (
        f"<h1>{html.escape(title)}</h1>{meta(link)}"
        f"<p>{plural(len(plotted), 'measured run')} with both figures; {plural(len(front), 'run')} on the Pareto front"
        f"{groups}{apart}. "
        "A run leaves the front only when another is significantly better on one axis and not significantly worse "
        "on the other, by the verdict Compare gives that pair.</p>"
        f"{decision_html(lines, 'Decision (each front run against its baseline)')}"
        f"<h2>The front</h2>{figures_html([fig], height='640px')}"
        f"<h2>Runs on the Pareto front</h2>{_front_table(plotted, fronts, x, y)}{_predicted_html(predicted, x, y)}"
        f"{noise_html(shown, names)}"
        f'<p class="meta">{html.escape(CI_WORDS + PAIRED_WORDS * bool(fronts.paired) + " " + VERDICT_NOTE)}</p>'
    )
    return page(title, body)
