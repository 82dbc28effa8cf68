"""Distribution figures of one or more runs' raw stamps: CDFs, histograms (whole-number count
axes), requested vs actual tokens, the per-request timeline, and small-sample warnings.

Pure functions of :class:`RequestRecord` lists, or of a run's aggregates
(:mod:`engine.measure.aggregates`: what the Run page draws from); no Streamlit. A CDF of more
samples than it draws says so in its title (drawn through its order statistics), and so does a
timeline of a sample of the requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from engine.jsonvalue import JSONMapping
from engine.measure.aggregates import Aggregates, cdf_points, histogram
from engine.measure.metrics import NS_PER_MS, itl_gaps_ns, tpot_ns, ttft_ns
from engine.measure.records import RequestRecord
from engine.measure.registry import GROUP_LABELS
from engine.measure.stats import min_samples
from engine.report.figures import LEGEND_BELOW, PALETTE
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload

# One metric's samples (ms), or what was drawn of them already: order statistics ``{"n", "ranks", "values"}``
# (engine.measure.aggregates.cdf_points) or a histogram ``{"n", "counts", "edges"}`` (aggregates.histogram).
MetricSamples = Sequence[float] | np.ndarray | JSONMapping


def latency_samples(requests: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Per-request TTFT and TPOT and pooled ITL gaps in ms (measured, successful requests)."""
    ok = [r for r in requests if not r.warmup and r.ok]
    return {
        "ttft_ms": [v / NS_PER_MS for r in ok if (v := ttft_ns(r)) is not None],
        "tpot_ms": [v / NS_PER_MS for r in ok if (v := tpot_ns(r)) is not None],
        "itl_ms": [g / NS_PER_MS for r in ok for g in itl_gaps_ns(r)],
    }


def latency_samples_of(agg: Aggregates) -> dict[str, MetricSamples]:
    """:func:`latency_samples` from a run's aggregates: TTFT and TPOT per request (ms arrays), ITL as its
    stored order statistics (``{"n", "ranks", "values"}``) and histogram (``itl_hist``)."""
    return {"ttft_ms": agg.ms("ttft"), "tpot_ms": agg.ms("tpot"), "itl_ms": agg.itl["cdf"], "itl_hist": agg.itl["hist"]}


def cdf_figure(series: Mapping[str, MetricSamples], metric: str, max_points: int = 2000) -> go.Figure:
    """Empirical CDFs of one metric (ms), one line per named series (overlaid for Compare).

    A series is its samples, or their order statistics already drawn (``{"n", "ranks", "values"}``,
    :func:`engine.measure.aggregates.cdf_points`). A series of more than ``max_points`` samples is
    drawn through that many of its order statistics (smallest and largest kept), so exports of large
    runs stay small; the title then says so.
    """
    fig = go.Figure()
    label = GROUP_LABELS.get(metric, metric)
    thinned: list[str] = []
    for i, (name, values) in enumerate(series.items()):
        pts = values if isinstance(values, Mapping) else cdf_points(values, max_points)
        n, ranks, vals = int(pts["n"]), np.asarray(pts["ranks"]), np.asarray(pts["values"], dtype=float)
        if not n:
            continue
        if ranks.size < n:
            thinned.append(f"{ranks.size:,} of {n:,}")
        fig.add_trace(
            go.Scatter(
                x=vals.astype(np.float32),  # float32: ample for a chart, half the bytes in an export
                y=((ranks + 1) / n).astype(np.float32),
                mode="lines",
                line={"shape": "hv", "color": PALETTE[i % 10]},
                name=f"{name} (n={n})",
                hovertemplate="%{x:.3f} ms: %{y:.1%}<extra>" + name + "</extra>",
            )
        )
    note = f" (drawn through {', '.join(thinned)} order statistics)" if thinned else ""
    fig.update_layout(
        title=f"{label} CDF{note}",
        xaxis_title=f"{label} [ms]",
        yaxis_title="fraction of samples ≤ x",
        yaxis_range=[0, 1.02],
        template="plotly_white",
        legend={**LEGEND_BELOW, "y": -0.22},  # run names are long: under the plot, never squeezing it
    )
    return fig


def count_step(top: float, ticks: int = 6) -> int:
    """A whole-number tick step for a count axis topping at ``top`` (no 0.5 ticks)."""
    return max(1, math.ceil(max(top, 1.0) / ticks))


def histogram_figure(values: MetricSamples, metric: str, bins: int = 30) -> go.Figure:
    """Histogram of one metric's samples in ms (or of its bins already counted: ``{"n", "counts", "edges"}``,
    :func:`engine.measure.aggregates.histogram`); the count axis has whole-number ticks."""
    name = GROUP_LABELS.get(metric, metric)
    hist = values if isinstance(values, Mapping) else histogram(values, bins)
    counts, edges = np.asarray(hist["counts"]), np.asarray(hist["edges"], dtype=float)
    fig = go.Figure()
    top = 0.0
    if counts.size:
        top = float(counts.max())
        fig.add_trace(
            go.Bar(
                x=(edges[:-1] + edges[1:]) / 2,
                y=counts,
                width=np.diff(edges) * 0.95,
                name=name,
                marker={"color": PALETTE[0]},
                hovertemplate="%{x:.3f} ms: %{y} samples<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"{name} histogram (n={hist['n']})", xaxis_title=f"{name} [ms]", template="plotly_white", bargap=0.05
    )
    fig.update_yaxes(title_text="count", tick0=0, dtick=count_step(top), rangemode="tozero")
    return fig


@dataclass(frozen=True)
class Requested:
    """What the spec's workload asked for: prompt tokens (None for a prompt file), their spread, output tokens."""

    prompt_tokens: int | None
    output_tokens: int | None
    prompt_length: str = "fixed"
    spread: float = 0.0

    @classmethod
    def from_spec(cls, spec: JSONMapping | None) -> Requested:
        w = flat_workload((spec or {}).get("workload"))
        traffic = stored_traffic(w)
        return cls(
            traffic.nominal_prompt_tokens() if traffic is not None else w.get("prompt_tokens"),
            w.get("output_tokens"),
            w.get("prompt_length") or "fixed",
            float(w.get("prompt_length_spread") or 0.0),
        )

    def prompt_range(self) -> tuple[float, float] | None:
        """The requested prompt lengths' range: uniform bounds, or mean ± 1 sd for normal; None when fixed."""
        if self.prompt_tokens is None or self.prompt_length == "fixed" or not self.spread:
            return None
        width = self.prompt_tokens * self.spread
        return self.prompt_tokens - width, self.prompt_tokens + width


def _token_bars(fig: go.Figure, values: list[int], col: int) -> float:
    """Whole-token bins (wider when the range is wide); returns the highest count."""
    if not values:
        return 0.0
    lo, hi = min(values), max(values)
    width = max(1, math.ceil((hi - lo + 1) / 40))
    edges = np.arange(lo, hi + width + 1, width)
    counts, _ = np.histogram(values, bins=edges)
    centres = edges[:-1] + (width - 1) / 2
    fig.add_trace(
        go.Bar(
            x=centres, y=counts, width=width * 0.9, marker={"color": PALETTE[0]}, name="actual", showlegend=col == 1
        ),
        row=1,
        col=col,
    )
    return float(counts.max())


def _token_axis(fig: go.Figure, col: int, values: list[int]) -> None:
    """A whole-number token axis around the values (padded, so one value is not one full-width bar)."""
    if not values:
        return
    lo, hi = min(values), max(values)
    pad = max(3.0, (hi - lo) * 0.1)
    step = count_step(hi - lo + 2 * pad, ticks=8)
    fig.update_xaxes(range=[lo - pad, hi + pad], tick0=0, dtick=step, row=1, col=col)


def token_histograms(requests: Sequence[RequestRecord], requested: Requested) -> go.Figure:
    """Prompt and output tokens per measured request (actual), each with the requested value marked."""
    ok = [r for r in requests if not r.warmup]
    return token_figure([int(r.prompt_tokens) for r in ok], [int(r.output_tokens) for r in ok if r.ok], requested)


def token_figure_of(agg: Aggregates, requested: Requested) -> go.Figure:
    """:func:`token_histograms` from a run's aggregates."""
    c, m = agg.columns, agg.mask()
    done = m & (c["ok"] == 1)
    return token_figure(c["prompt_tokens"][m].tolist(), c["output_tokens"][done].tolist(), requested)


def token_figure(prompts: list[int], outputs: list[int], requested: Requested) -> go.Figure:
    """Prompt and output tokens per request, each with the requested value marked."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("prompt tokens per request", "output tokens per request"))
    top = max(_token_bars(fig, prompts, 1), _token_bars(fig, outputs, 2))
    for col, values, want in ((1, prompts, requested.prompt_tokens), (2, outputs, requested.output_tokens)):
        _token_axis(fig, col, [*values, *([want] if want is not None else [])])
        if want is not None:
            fig.add_vline(
                x=want, line={"color": PALETTE[3], "dash": "dash"}, annotation_text=f"requested {want}", row=1, col=col
            )
    span = requested.prompt_range()
    if span:
        fig.add_vrect(x0=span[0], x1=span[1], fillcolor=PALETTE[3], opacity=0.08, line_width=0, row=1, col=1)
    fig.update_xaxes(title_text="tokens")
    fig.update_yaxes(title_text="requests", tick0=0, dtick=count_step(top), rangemode="tozero")
    fig.update_layout(title="Requested vs actual tokens", template="plotly_white", bargap=0.05, showlegend=False)
    return fig


SAMPLE_NOUNS = {"ttft_ms": "requests", "tpot_ms": "requests", "itl_ms": "token gaps", "e2el_ms": "requests"}


def _where(n: int, q: int) -> str:
    """Which sample a percentile of ``n`` lands on (linear interpolation, rank rounded): ``the 2nd largest value``."""
    rank = round(n - (n - 1) * q / 100)  # 1 = the largest
    return "the largest value" if rank <= 1 else f"the {_ordinal(rank)} largest value"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def small_sample_warnings(samples: Mapping[str, Sequence[float]]) -> list[str]:
    """One warning per latency group whose tail percentiles its sample cannot support (:func:`min_samples`).

    ``TTFT, 12 requests: p95 and p99 are the largest value, p90 the 2nd largest value: not tail
    estimates (a 95 % interval needs 29 for p90, 59 for p95, 299 for p99)``.
    """
    out = []
    for key, values in samples.items():
        n = len(values)
        thin = [q for q in (90, 95, 99) if n and n < min_samples(q)]
        if not thin:
            continue
        groups: dict[str, list[int]] = {}
        for q in reversed(thin):
            groups.setdefault(_where(n, q), []).append(q)
        parts = [f"{_qs(sorted(qs))} {'is' if len(qs) == 1 else 'are'} {where}" for where, qs in groups.items()]
        if n < min_samples(50):
            parts.append(f"even p50 has no 95 % interval (needs {min_samples(50)})")
        needs = ", ".join(f"{min_samples(q)} for p{q}" for q in thin)
        what = "not a tail estimate" if thin == [99] else "not tail estimates"
        head = f"{GROUP_LABELS.get(key, key)}, {n} {SAMPLE_NOUNS.get(key, 'samples')}"
        out.append(f"{head}: {'; '.join(parts)}: {what} (a 95 % interval needs {needs})")
    return out


def _qs(qs: list[int]) -> str:
    names = [f"p{q}" for q in qs]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


Phases = dict[str, tuple[list[float], list[float], list[str], list[str]]]  # phase -> (starts, lengths, rows, hover)


def _spans(r: RequestRecord) -> list[tuple[str, int, int]]:
    """A request's (phase, start ns, end ns): queued, to first token, decoding, and a failure mark."""
    tokens = [t for t, n in zip(r.chunk_ns, r.chunk_tokens, strict=True) if n > 0]
    spans = [("queued", r.arrival_ns, r.send_ns)]
    if tokens:
        spans += [("to first token", r.send_ns, tokens[0]), ("decoding", tokens[0], tokens[-1])]
    if not r.ok:
        end = tokens[-1] if tokens else r.send_ns
        spans.append(("failed", end, end + 1))
    return spans


def _timeline_phases(requests: Sequence[RequestRecord]) -> Phases:
    """The bars of every phase, in ms since the earliest stamp of the run."""
    t0 = min(min(r.arrival_ns, r.send_ns) for r in requests)

    def ms(t: int) -> float:
        return (t - t0) / NS_PER_MS

    phases: Phases = {k: ([], [], [], []) for k in ("queued", "to first token", "decoding", "failed")}
    for r in requests:
        label = f"#{r.index}" + (" (warm-up)" if r.warmup else "")
        for phase, a, b in _spans(r):
            if b < a:
                continue
            base, length, ys, hover = phases[phase]
            base.append(ms(a))
            length.append(max(ms(b) - ms(a), 0.0))
            ys.append(label)
            hover.append(
                f"{label} {phase}: {ms(a):.1f} → {ms(b):.1f} ms" + (f" ({r.error})" if phase == "failed" else "")
            )
    return phases


TIMELINE_REQUESTS = 300  # a run's page draws at most this many requests' bars (every k-th beyond)


def timeline_of(agg: Aggregates, limit: int = TIMELINE_REQUESTS) -> go.Figure:
    """:func:`timeline_figure` of a run's aggregates: every request, or every k-th when there are more than
    ``limit`` (evenly spread over the run; the title says which)."""
    keep = np.unique(np.linspace(0, len(agg) - 1, min(len(agg), limit)).round().astype(int)) if len(agg) else []
    records = agg.endpoint_records(keep)
    if len(records) == len(agg):
        return timeline_figure(records)
    step = len(agg) / max(len(records), 1)
    return timeline_figure(records, f"{len(records):,} of {len(agg):,} requests (every {step:.0f}th)")


def timeline_figure(requests: Sequence[RequestRecord], sampled: str | None = None) -> go.Figure:
    """Per-request timeline: queued (due → sent), to first token, decoding (first → last token).

    Times are ms since the earliest stamp of the requests drawn; failed requests end with a red mark.
    ``sampled`` says which requests these are when they are not all of the run's.
    """
    fig = go.Figure()
    fig.update_layout(
        title="Per-request timeline" + (f": {sampled}" if sampled else ""),
        barmode="overlay",
        template="plotly_white",
        xaxis_title="time since start [ms]",
        yaxis_title="request",
        yaxis_autorange="reversed",
        legend_orientation="h",
        height=max(300, min(1200, 40 + 18 * len(requests))),
    )
    if not requests:
        return fig
    colours = {"queued": "#bbbbbb", "to first token": "#ff7f0e", "decoding": "#1f77b4", "failed": "#d62728"}
    for phase, (base, length, ys, hover) in _timeline_phases(requests).items():
        if not ys:
            continue
        fig.add_trace(
            go.Bar(
                base=base,
                x=length,
                y=ys,
                orientation="h",
                name=phase,
                marker_color=colours[phase],
                hovertext=hover,
                hoverinfo="text",
            )
        )
    return fig
