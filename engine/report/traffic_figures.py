"""Traffic in figures and words (pure; no Streamlit): a preview's distributions before Submit, and a run's
source, per-turn TTFT and schedule adherence after it.

* Preview (:class:`~engine.report.traffic_preview.TrafficPreview`): requests due per second, prompt and
  output length histograms, turns per session.
* Run: the source in words from its provenance (``request_source``: what the source counted) and its
  workload (file, format, the input's hash); TTFT p50 per turn of sessions (``metrics["turns"]``, with its
  95 % interval); and for requests with due times (a trace, an arrival process) the send minus the due
  time of each measured request (from the run's aggregates), with its p50/p99 in words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.aggregates import NS_PER_MS, Aggregates
from engine.measure.schedule import lateness, lateness_words
from engine.report.distributions import count_step
from engine.report.figures import PALETTE
from engine.spec import sources
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload

if TYPE_CHECKING:
    from engine.report.traffic_preview import TrafficPreview

_LAYOUT: JSONObject = {"template": "plotly_white", "height": 300, "margin": {"t": 50, "b": 40, "l": 50, "r": 20}}


def _bars(x: Sequence[float], y: Sequence[float], title: str, x_title: str, y_title: str, hover: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(x), y=list(y), marker={"color": PALETTE[0]}, hovertemplate=hover))
    fig.update_layout(title=title, xaxis_title=x_title, bargap=0.05, **_LAYOUT)
    fig.update_yaxes(title_text=y_title, tick0=0, dtick=count_step(float(max(y, default=0))), rangemode="tozero")
    return fig


def _nice(width: float) -> float:
    """The first of 1, 2, 5, 10, 20, 50 ... seconds at least ``width``."""
    step = 1.0
    while step < width:
        for factor in (2.0, 2.5, 2.0):  # 1 -> 2 -> 5 -> 10 -> 20 -> 50 ...
            step *= factor
            if step >= width:
                break
    return step


def rate_figure(due_s: Sequence[float], window_s: float | None = None) -> go.Figure:
    """Requests due per second over the run (bins of ``window_s``, chosen from the span when not given)."""
    due = np.asarray(due_s, dtype=float)
    span = float(due.max()) if due.size else 0.0
    width = window_s or _nice(span / 60)
    edges = np.arange(0.0, span + width, width) if due.size else np.zeros(0)
    counts = np.histogram(due, bins=edges)[0] if edges.size > 1 else np.asarray([due.size])
    rate = counts / width
    x = edges[:-1] if edges.size > 1 else np.zeros(1)
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=rate,
            mode="lines",
            line={"shape": "hv", "color": PALETTE[0]},
            hovertemplate="%{x:.0f} s: %{y:.2f} req/s",
        )
    )
    fig.update_layout(title=f"Requests due per second ({width:g} s bins)", xaxis_title="time [s]", **_LAYOUT)
    fig.update_yaxes(title_text="req/s", rangemode="tozero")
    return fig


def length_figure(lengths: Sequence[int], what: str, bins: int = 30) -> go.Figure:
    """A histogram of token lengths (``what``: "prompt" or "output")."""
    values = np.asarray(lengths, dtype=float)
    if not values.size:
        return _bars([], [], f"{what.capitalize()} tokens (none)", "tokens", "requests", "")
    counts, edges = np.histogram(values, bins=min(bins, max(1, len(set(lengths)))))
    centres = (edges[:-1] + edges[1:]) / 2
    title = f"{what.capitalize()} tokens (n={values.size:,}, median {np.median(values):,.0f})"
    return _bars(centres, counts, title, "tokens", "requests", "%{x:.0f} tokens: %{y} requests<extra></extra>")


def turns_figure(turns_per_session: Sequence[int]) -> go.Figure:
    """How many sessions have each number of turns."""
    counts = Counter(turns_per_session)
    x = sorted(counts)
    title = f"Turns per session ({len(turns_per_session):,} sessions)"
    return _bars(x, [counts[k] for k in x], title, "turns", "sessions", "%{x} turns: %{y} sessions<extra></extra>")


def preview_lines(p: TrafficPreview) -> list[str]:
    """A preview's numbers in words, one line each."""
    lines = [f"source: {p.source}"]
    unit = f"turns in {len(p.turns_per_session):,} sessions" if p.turns_per_session else "requests"
    count = f"{p.requests:,} {unit}" + (f" ({p.previewed:,} previewed)" if p.capped else "")
    lines.append(count)
    if p.duration_s is not None:
        lines.append(f"duration: {p.duration_s:,.1f} s ({p.duration_basis})")
    else:
        lines.append(f"duration: {p.duration_basis}")
    for what, values in (("prompt", p.prompt_tokens), ("output", p.output_tokens)):
        if values:
            arr = np.asarray(values)
            lines.append(
                f"{what} tokens: median {np.median(arr):,.0f}, p99 {np.percentile(arr, 99):,.0f}, max {arr.max():,}"
            )
    if p.prefix_share is not None:
        lines.append(f"shared-prefix share: {p.prefix_share:.0%} of prompt tokens repeat a prefix sent before")
    if p.turns_per_session:
        lines.append(
            f"turns per session: {np.mean(p.turns_per_session):.1f} on average, at most {max(p.turns_per_session)}"
        )
    lines += facts_lines(p.facts)
    return lines


def facts_lines(facts: JSONMapping | None) -> list[str]:
    """What a source counted, in words: rows skipped (by reason), clipped, cycled, cancellations planned."""
    f = dict(facts or {})
    lines = []
    skipped = f.get("skipped")
    if isinstance(skipped, Mapping) and skipped:
        lines.append("skipped: " + ", ".join(f"{n:,} ({why})" for why, n in skipped.items()))
    elif isinstance(skipped, int) and skipped:
        lines.append(f"skipped: {skipped:,} rows")
    if f.get("clipped"):
        lines.append(f"clipped to the model's context: {f['clipped']:,} requests")
    if f.get("cycled"):
        lines.append(str(f["cycled"]))
    if f.get("filtered"):
        lines.append(f"left out by the prompt limits: {f['filtered']:,} rows")
    before = f.get("as_recorded")
    if isinstance(before, Mapping):
        lines.append(
            f"as recorded (before scaling and limits): {before.get('rows', 0):,} rows, prompts median "
            f"{before.get('prompt_median', 0):,}, outputs median {before.get('output_median', 0):,} tokens"
        )
    if f.get("capped"):
        lines.append(f"capped by requests: {f['capped']}")
    if f.get("records_read"):
        lines.append(f"records read: {f['records_read']:,}")
    if f.get("cancel_planned"):
        lines.append(f"cancellations planned: {f['cancel_planned']:,}")
    return lines


# -- a stored run ----------------------------------------------------------------------------------
def run_source_lines(spec: JSONMapping | None, provenance: JSONMapping | None) -> list[str]:
    """A run's source in words: the file, its format and hash prefix, then what the source counted."""
    workload = flat_workload((spec or {}).get("workload"))
    source = dict((provenance or {}).get("request_source") or {})
    traffic = stored_traffic(workload)
    if traffic is None or (traffic.source == sources.names()[0] and not workload.get("cancel_rate")):
        return []  # the default source's prompts (synthetic lengths): the recipe line says it all
    head = traffic.words()
    lines = [head]
    if source.get("rows") is not None:
        lines.append(f"rows replayed: {source['rows']:,} over {source.get('duration_s', 0):,.1f} s")
    if source.get("sessions") is not None:
        lines.append(f"sessions: {source['sessions']:,}, {source.get('turns', 0):,} turns")
    if source.get("shared_blocks") is not None:
        lines.append(f"prompt blocks an earlier row already sent: {source['shared_blocks']:.0%}")
    if source.get("prefix_share") is not None:
        lines.append(f"prompt tokens in a shared prefix: {source['prefix_share']:.0%}")
    return lines + facts_lines(source)


def turns_ttft_figure(turns: Sequence[JSONMapping]) -> go.Figure:
    """TTFT p50 per turn of sessions, with its 95 % interval where the sample supports one."""
    rows = [t for t in turns if (t.get("ttft_ms") or {}).get("p50") is not None]
    x = [int(t["turn"]) + 1 for t in rows]
    y = [float(t["ttft_ms"]["p50"]) for t in rows]
    cis = [((t["ttft_ms"].get("ci") or {}).get("p50")) for t in rows]
    plus = [ci[1] - v if ci else 0.0 for ci, v in zip(cis, y, strict=True)]
    minus = [v - ci[0] if ci else 0.0 for ci, v in zip(cis, y, strict=True)]
    text = [f"n={t.get('n')}, prompt {t.get('prompt_tokens_mean', 0):,.0f} tok" for t in rows]
    fig = go.Figure(
        go.Bar(
            x=x,
            y=y,
            customdata=text,
            marker={"color": PALETTE[0]},
            error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": any(cis)},
            hovertemplate="turn %{x}: TTFT p50 %{y:.1f} ms (%{customdata})<extra></extra>",
        )
    )
    fig.update_layout(title="TTFT p50 per turn (95 % CI)", xaxis_title="turn", **_LAYOUT)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(title_text="TTFT p50 [ms]", rangemode="tozero")
    return fig


def turns_lines(turns: Sequence[JSONMapping]) -> list[str]:
    """Per turn: requests, mean prompt, TTFT p50 and the cached share where the engine said."""
    out = []
    for t in turns:
        p50 = (t.get("ttft_ms") or {}).get("p50")
        cached = t.get("cached_share")
        out.append(
            f"turn {int(t['turn']) + 1}: {t.get('n', 0)} requests, prompt {t.get('prompt_tokens_mean', 0):,.0f} tokens"
            f" on average, TTFT p50 {'-' if p50 is None else f'{p50:,.1f} ms'}"
            + (f", {cached:.0%} of prompt tokens from the prefix cache" if cached is not None else "")
        )
    return out


def send_lateness_ms(agg: Aggregates) -> tuple[np.ndarray, np.ndarray]:
    """(due time in s from the first measured send, send minus due in ms) of every measured request."""
    c, m = agg.columns, agg.mask()
    due, send = c["arrival"][m], c["send"][m]
    return due / 1e9, (send - due) / NS_PER_MS


def adherence_words(late_ms: np.ndarray) -> str:
    """``send minus due: p50 0.40 ms, p99 3.10 ms, max 9.00 ms over 200 requests`` (large values in seconds:
    ``69 s``), by the one lateness function every page uses (:mod:`engine.measure.schedule`)."""
    if not late_ms.size:
        return "no measured request"
    return lateness_words(lateness(late_ms), "send minus due")


def adherence_figure(agg: Aggregates) -> go.Figure:
    """Send minus due of each measured request against its due time (a request sent late sits high); in
    seconds when the latest is a second or more."""
    due_s, late = send_lateness_ms(agg)
    seconds = bool(late.size) and float(late.max()) >= 1000
    y, unit = (late / 1000, "s") if seconds else (late, "ms")
    fig = go.Figure(
        go.Scattergl(
            x=due_s,
            y=y,
            mode="markers",
            marker={"size": 4, "color": PALETTE[0]},
            hovertemplate=f"due %{{x:.3f}} s: sent %{{y:,.{1 if seconds else 2}f}} {unit} late<extra></extra>",
        )
    )
    fig.update_layout(title="Schedule adherence: send minus due", xaxis_title="due time [s]", **_LAYOUT)
    fig.update_yaxes(title_text=f"send − due [{unit}]")
    return fig
