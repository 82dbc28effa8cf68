"""Regression gates: a suite entry's newest run against its baseline run, one verdict per gate.

A gate names a registry metric and a rule (see :class:`Gate`). Relative rules compare the
new run with the baseline; absolute rules (``min``, ``max``) look at the new run alone. A
relative rule with ``significant`` fails only when the change is worse than the threshold
*and* its 95 % interval lies wholly on the worse side. The interval is the one verdict's
(:mod:`engine.report.verdicts`, the same as Compare's for the pair): a bootstrap over the raw requests
for latency percentiles where they were read, paired perplexity on the same text, two standard errors
for other accuracy figures, the stored intervals otherwise; a gate that passes says the change in
Compare's words ("better (significant)", "no significant difference (within ± 5 %)", "not enough data").

Where there is no interval (a sample too small, nothing stored) a significance-only gate
cannot fail: its verdict is "inconclusive", said as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.jsonvalue import JSONObject
from engine.measure import registry
from engine.measure.registry import LATENCY_GROUPS
from engine.report.values import flat_metrics, run_hints
from engine.report.verdict_words import table_words
from engine.report.verdicts import Verdict, run_samples, verdicts_between

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from storage.runs import RunDetail

Z95 = 1.959963984540054
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
_RANK = {PASS: 0, INCONCLUSIVE: 1, FAIL: 2}  # the verdict of several rules: the worst


class Gate(BaseModel):
    """One rule on one metric: e.g. ``{metric: tpot_ms_p50, max_regression_pct: 5, significant: true}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    metric: str = Field(description="a registry metric key: tpot_ms_p50, output_tokens_per_s, quality.perplexity ...")
    max_regression_pct: float | None = Field(None, ge=0, description="worse (by the metric's direction) by at most %")
    max_increase_pct: float | None = Field(None, ge=0, description="higher than the baseline by at most %")
    max_decrease_pct: float | None = Field(None, ge=0, description="lower than the baseline by at most %")
    min: float | None = Field(None, description="the new value must be at least this")
    max: float | None = Field(None, description="the new value must be at most this")
    significant: bool | None = Field(
        None, description="a relative rule fails only on a significant change (default: latency and throughput)"
    )

    @field_validator("metric", mode="before")
    @classmethod
    def _one_spelling(cls, value: object) -> object:
        """Older spellings (``tpot_ms.p50``, ``tpot_p50``) read as the flat key."""
        return registry.canonical(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _known_metric_and_a_rule(self) -> Gate:
        metric = registry.lookup(self.metric)
        if not metric.is_metric:
            raise ValueError(
                f"{self.metric!r} is not a metric (unknown, or bookkeeping); gates take registry keys such as "
                "tpot_ms_p50, ttft_ms_p90, output_tokens_per_s, quality.perplexity, quality.task:NAME"
            )
        if not self.relative_rules() and self.min is None and self.max is None:
            raise ValueError(
                f"gate on {self.metric} has no rule: give max_regression_pct, max_increase_pct, "
                "max_decrease_pct, min or max"
            )
        return self

    def relative_rules(self) -> list[tuple[str, float, int | None]]:
        """``(name, threshold %, sign)``: sign +1 means an increase is worse, -1 a decrease, None by direction."""
        rules = [
            ("max_regression_pct", self.max_regression_pct, None),
            ("max_increase_pct", self.max_increase_pct, 1),
            ("max_decrease_pct", self.max_decrease_pct, -1),
        ]
        return [(name, value, sign) for name, value, sign in rules if value is not None]

    @property
    def needs_significance(self) -> bool:
        if self.significant is not None:
            return self.significant
        return latency_percentile(self.metric) is not None or registry.lookup(self.metric).kind == "throughput"


@dataclass(frozen=True)
class Change:
    """New against baseline: both values, the change in % and its 95 % interval in % (None: none)."""

    base: float | None
    new: float | None
    pct: float | None
    ci_pct: tuple[float, float] | None
    why_no_ci: str = ""
    verdict: Verdict | None = None  # the one verdict on this change (engine/report/verdicts.py)


@dataclass(frozen=True)
class GateResult:
    """One gate of one entry: the figures, the verdict and why."""

    entry: str
    metric: str
    label: str
    rule: str
    status: str  # pass | fail | inconclusive
    reason: str
    base: float | None = None
    new: float | None = None
    change_pct: float | None = None
    ci_pct: tuple[float, float] | None = None
    base_run: int | None = None
    new_run: int | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def value_text(self, value: float | None) -> str:
        return registry.lookup(self.metric).format(value)

    def change_text(self) -> str:
        if self.change_pct is None:
            return "–"
        if self.ci_pct is None:
            return f"{self.change_pct:+.1f} % (no CI)"
        return f"{self.change_pct:+.1f} % ({self.ci_pct[0]:+.1f} to {self.ci_pct[1]:+.1f})"


@dataclass
class EntryCheck:
    """What one entry is checked with: its gates and the two runs (stored run objects, None: missing)."""

    name: str
    gates: list[Gate]
    base_run: RunDetail | None
    new_run: RunDetail | None
    base_requests: list[RequestRecord] = field(default_factory=list)
    new_requests: list[RequestRecord] = field(default_factory=list)


# -- the interval of a change --------------------------------------------------------------
def latency_percentile(key: str) -> tuple[str, float] | None:
    """``("tpot_ms", 50.0)`` for a latency percentile key; None for anything else."""
    metric = registry.lookup(key)
    if metric.group in LATENCY_GROUPS and metric.interval == "percentile" and metric.stat is not None:
        return metric.group, float(metric.stat.removeprefix("p"))
    return None


def _pct(lo_ratio: float, hi_ratio: float) -> tuple[float, float]:
    return (lo_ratio - 1.0) * 100.0, (hi_ratio - 1.0) * 100.0


def change_of(check: EntryCheck, key: str) -> Change:
    """The change of ``key`` from the entry's baseline to its new run, with its 95 % interval: the one verdict's
    (:func:`engine.report.verdicts.verdicts_between`, from the raw requests where they were read), as Compare."""
    base_v = flat_metrics(check.base_run).get(key) if check.base_run else None
    new_v = flat_metrics(check.new_run).get(key) if check.new_run else None
    if base_v is None or new_v is None or base_v == 0:
        return Change(base_v, new_v, None, None, "not measured")
    pct = (new_v / base_v - 1.0) * 100.0
    samples = tuple(
        run_samples(requests, (run.metrics or {}).get("duration_s")) if requests else None
        for run, requests in ((check.base_run, check.base_requests), (check.new_run, check.new_requests))
    )
    hints = {**run_hints(check.base_run), **run_hints(check.new_run)}
    found = verdicts_between(check.base_run, check.new_run, [key], ({key: base_v}, {key: new_v}), samples, hints)
    verdict = found.get(key)
    if verdict is None or verdict.interval is None:
        reason = "no interval stored" if verdict is None else verdict.reason or "no interval"
        why = (
            f"n too small for a 95 % interval ({reason})" if verdict is not None and verdict.state == "thin" else reason
        )
        return Change(base_v, new_v, pct, None, why, verdict)
    return Change(base_v, new_v, pct, _pct(verdict.interval.lo, verdict.interval.hi), verdict=verdict)


# -- verdicts ------------------------------------------------------------------------------
def _rule_text(gate: Gate) -> str:
    parts = []
    for name, value, _sign in gate.relative_rules():
        word = {"max_regression_pct": "worse", "max_increase_pct": "higher", "max_decrease_pct": "lower"}[name]
        parts.append(f"≤ {value:g} % {word}" + (" (significant)" if gate.needs_significance else ""))
    if gate.min is not None:
        parts.append(f"≥ {gate.min:g}")
    if gate.max is not None:
        parts.append(f"≤ {gate.max:g}")
    return ", ".join(parts)


def _worse_sign(gate: Gate, sign: int | None, key: str, hints: Mapping[str, str]) -> int:
    if sign is not None:
        return sign
    return 1 if registry.lookup(key, hints.get(key)).minimise else -1


def _relative_verdict(gate: Gate, change: Change, hints: Mapping[str, str]) -> tuple[str, str]:
    """(status, reason) of the gate's relative rules on one change."""
    if change.pct is None:
        return FAIL, f"cannot compare: {change.why_no_ci} in {'the baseline' if change.base is None else 'the new run'}"
    for _name, threshold, sign in gate.relative_rules():
        s = _worse_sign(gate, sign, gate.metric, hints)
        worse = s * change.pct
        if worse <= threshold:
            continue
        if not gate.needs_significance:
            return FAIL, f"{worse:.1f} % worse, over the {threshold:g} % gate"
        if change.ci_pct is None:
            return INCONCLUSIVE, f"{worse:.1f} % worse but no interval to judge it ({change.why_no_ci})"
        if min(s * change.ci_pct[0], s * change.ci_pct[1]) > 0:
            return FAIL, f"{worse:.1f} % worse (significant), over the {threshold:g} % gate"
        return PASS, f"{worse:.1f} % worse, not significant (the interval spans no change)"
    if change.verdict is not None and change.verdict.state in ("better", "same", "unclear"):
        return PASS, table_words(change.verdict)  # the words Compare uses for this change
    return PASS, "within the gate"


def _absolute_verdict(gate: Gate, value: float | None) -> tuple[str, str] | None:
    if gate.min is None and gate.max is None:
        return None
    if value is None:
        return FAIL, "not measured in the new run"
    if gate.min is not None and value < gate.min:
        return FAIL, f"{value:.4g} is below the minimum {gate.min:g}"
    if gate.max is not None and value > gate.max:
        return FAIL, f"{value:.4g} is above the maximum {gate.max:g}"
    return PASS, "within bounds"


def _missing_run(check: EntryCheck) -> str | None:
    if check.new_run is None:
        return "no run of this entry's spec yet"
    if check.new_run.status != "done":
        return f"newest run {check.new_run.id} {check.new_run.status}: {check.new_run.error or 'no reason stored'}"
    return None


def _same_run(check: EntryCheck) -> bool:
    return check.base_run is not None and check.new_run is not None and check.base_run.id == check.new_run.id


def evaluate(check: EntryCheck) -> list[GateResult]:
    """Every gate of one entry, judged."""
    out = []
    hints = {**(run_hints(check.base_run) if check.base_run else {}), **(run_hints(check.new_run) or {})}
    missing = _missing_run(check)
    for gate in check.gates:
        head = {
            "entry": check.name,
            "metric": gate.metric,
            "label": registry.lookup(gate.metric, hints.get(gate.metric)).label,
            "rule": _rule_text(gate),
            "base_run": getattr(check.base_run, "id", None),
            "new_run": getattr(check.new_run, "id", None),
        }
        if missing:
            out.append(GateResult(**head, status=FAIL, reason=missing))
            continue
        if _same_run(check) and gate.relative_rules():
            out.append(GateResult(**head, status=INCONCLUSIVE, reason="no run since the baseline (the newest is it)"))
            continue
        change = change_of(check, gate.metric)
        verdicts = [v for v in (_absolute_verdict(gate, change.new),) if v is not None]
        if gate.relative_rules():
            if check.base_run is None:
                verdicts.append((FAIL, "no baseline run for this entry"))
            else:
                verdicts.append(_relative_verdict(gate, change, hints))
        status = max((s for s, _ in verdicts), key=_RANK.__getitem__)
        reason = "; ".join(r for s, r in verdicts if s == status)
        out.append(
            GateResult(
                **head,
                status=status,
                reason=reason,
                base=change.base,
                new=change.new,
                change_pct=change.pct,
                ci_pct=change.ci_pct,
            )
        )
    return out


# -- the report: markdown for a CI job summary, JUnit XML, JSON ----------------------------
@dataclass(frozen=True)
class CheckReport:
    """Every gate of every entry of a suite against one baseline."""

    suite: str
    against: str
    results: list[GateResult]

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results if r.failed]

    @property
    def passed(self) -> bool:
        return not self.failed

    def headline(self) -> str:
        n, bad = len(self.results), len(self.failed)
        unsure = sum(r.status == INCONCLUSIVE for r in self.results)
        verdict = "FAILED" if bad else "passed"
        extra = f", {unsure} inconclusive" if unsure else ""
        return f"suite {self.suite} against {self.against}: {verdict} ({bad} of {n} gates failed{extra})"


def check_entries(suite: str, against: str, checks: list[EntryCheck]) -> CheckReport:
    """Judge every gate of every entry."""
    return CheckReport(suite, against, [r for c in checks for r in evaluate(c)])


_MARK = {PASS: "✅ pass", FAIL: "❌ FAIL", INCONCLUSIVE: "⚠️ inconclusive"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: CheckReport) -> str:
    """A markdown table (entry, metric, baseline, new, change with 95 % CI, verdict) under a headline."""
    lines = [
        f"### {_cell(report.headline())}",
        "",
        "| entry | metric | baseline | new | change (95 % CI) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.results:
        base = r.value_text(r.base) + (f" (run {r.base_run})" if r.base_run else "")
        new = r.value_text(r.new) + (f" (run {r.new_run})" if r.new_run else "")
        verdict = f"{_MARK[r.status]}: {r.reason} [{r.rule}]"
        cells = (r.entry, f"{r.label} · `{r.metric}`", base, new, r.change_text(), verdict)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def junit_xml(report: CheckReport) -> str:
    """JUnit XML: one test case per entry and gate (a failed gate is a failure, inconclusive is skipped)."""
    from xml.etree import ElementTree as ET

    root = ET.Element(
        "testsuite",
        name=f"latencylab suite {report.suite}",
        tests=str(len(report.results)),
        failures=str(len(report.failed)),
        skipped=str(sum(r.status == INCONCLUSIVE for r in report.results)),
    )
    for r in report.results:
        case = ET.SubElement(root, "testcase", classname=f"suite.{report.suite}.{r.entry}", name=r.metric)
        text = f"{r.label}: baseline {r.value_text(r.base)}, new {r.value_text(r.new)}, change {r.change_text()}"
        if r.status == FAIL:
            ET.SubElement(case, "failure", message=r.reason).text = f"{text}; gate {r.rule}"
        elif r.status == INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=r.reason)
        ET.SubElement(case, "system-out").text = text
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def report_json(report: CheckReport) -> JSONObject:
    """The report as one JSON document (each result's fields as in :class:`GateResult`)."""
    results = [asdict(r) for r in report.results]
    head = {"suite": report.suite, "against": report.against, "passed": report.passed}
    return {**head, "headline": report.headline(), "results": results}
