"""The decision line: a comparison in one sentence a PM can act on, and the repeats that would settle it.

``run 12 · INT8 weight-only (torchao): 1.35× faster decode (significant, 95 % CI 1.04–2.6×), perplexity
0.3 % worse (significant, 95 % CI 0.004–0.59 %); measured once under contention: repeat to confirm.``

The headline speed figure (decode, else first token, else throughput) and the headline accuracy figure
(perplexity, else the first task) are judged by :mod:`engine.report.verdicts` and said by
:mod:`engine.report.verdict_words`, as everywhere else. The line ends with how far it can be trusted:

- **not enough data to decide**: a headline figure is "not enough data" or has too few samples;
- **measured once**: a run has one trial, so drift between runs (another process, clocks, a warm cache)
  is not in its intervals; "under contention" when a run's noise flags say the machine was busy;
- **decision-grade**: every run measured in several trials, on a quiet machine, and every headline
  figure decided (better, worse, or no significant difference within the margin).

A pair with a predicted run (the serving simulator's) is no decision: its line says the prediction's error
against the measured run beside its band, or two predictions' change, as a prediction
(:func:`engine.report.predicted.pair_words`), graded "predicted", with no repeats to queue.

:func:`repeat_specs` gives the jobs that make a comparison decision-grade: each compared run's spec with
the ``decision`` measurement preset (at least 3 trials, more until TPOT p50 is known to ± 2 %), queued in
one go in the order the runs were compared (baseline, then each other run: A, B, C ... alternating, never
one recipe's jobs back to back), so drift on the machine falls on every recipe alike. Predicted runs are never
queued again: a simulation's spec names hardware the job may not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.measure import registry
from engine.report.naming import run_name
from engine.report.predicted import pair_words
from engine.report.runlike import is_predicted
from engine.report.values import flat_metrics, run_hints
from engine.report.verdict_words import phrase
from engine.report.verdicts import Verdict, verdicts_between

if TYPE_CHECKING:
    from engine.report.runlike import Measured, RunLike
    from engine.spec import JobSpec

SPEED_HEADLINES: tuple[tuple[str, str], ...] = (
    ("tpot_ms_p50", "decode"),
    ("ttft_ms_p50", "first token"),
    ("output_tokens_per_s", "throughput"),
)
REPEAT_TRIALS = 3  # rounds of the compared specs queued to decide: A B A B A B, so drift hits each alike
Values = Mapping[str, float | None]  # a run's flat figures (engine.report.values.flat_metrics)


@dataclass(frozen=True)
class Decision:
    """One run's decision line against the baseline, and whether repeats would make it decision-grade."""

    run_id: int
    text: str
    grade: str  # "decision-grade", "measured once", "under contention", "not enough data", "nothing to compare",
    # "predicted" (a pair with a predicted run: no decision)
    repeat: bool  # repeats (the decision preset) would help


def _trials(run: Measured) -> int:
    return max(1, len((getattr(run, "metrics", None) or {}).get("trials") or []))


def _contended(run: Measured) -> bool:
    flags = (getattr(run, "metrics", None) or {}).get("noise_flags") or []
    return any(isinstance(f, dict) and f.get("kind") == "machine" for f in flags)


def _headline(
    keys: Sequence[tuple[str, str]], v: Values, b: Values, verdicts: Mapping[str, Verdict]
) -> tuple[str, Verdict] | None:
    """The first of ``keys`` both runs have, with its verdict (a plain "none" one when it has none)."""
    for key, what in keys:
        if v.get(key) is not None and b.get(key) not in (None, 0):
            found = verdicts.get(key) or Verdict(key, v[key] / b[key], state="none", reason="no interval")
            return what, found
    return None


def _quality_keys(v: Values) -> list[tuple[str, str]]:
    tasks = sorted(k for k in v if k.startswith("quality.task:"))
    return [("quality.perplexity", "perplexity"), *((k, registry.label(k)) for k in tasks[:1])]


def evidence(runs: Sequence[Measured], headlines: Sequence[tuple[str, Verdict]]) -> tuple[str, str, bool]:
    """(grade, words, repeat) for runs judged on ``headlines`` ((what, verdict) pairs): how far the
    decision line can be trusted (module doc)."""
    contended = any(_contended(r) for r in runs)
    once = min(_trials(r) for r in runs) < 2
    where = " under contention" if contended else ""
    undecided = [what for what, v in headlines if not v.decided]
    if undecided:
        measured = f" (measured{' once' if once else ''}{where})" if once or contended else ""
        return "not enough data", f"not enough data to decide on {' or '.join(undecided)}{measured}: repeat", True
    if once:
        return "measured once", f"measured once{where}: repeat to confirm", True
    if contended:
        return "under contention", "measured under contention: repeat on a quiet machine", True
    return "decision-grade", f"decision-grade ({min(_trials(r) for r in runs)} trials each)", False


def decision_line(
    run: RunLike, base: RunLike, verdicts: Mapping[str, Verdict] | None = None, label: str | None = None
) -> Decision:
    """The decision line of ``run`` against ``base`` (module doc); ``verdicts`` as Compare computed them
    (:func:`engine.report.verdicts.verdicts_between`), else judged here on the stored intervals."""
    label = label or run_name(run)
    for who, r in (("", run), ("the baseline ", base)):
        if getattr(r, "status", "done") != "done":
            reason = getattr(r, "error", None) or "no reason recorded"
            return Decision(
                run.id, f"{label}: {who}{r.status} ({reason}); nothing to decide", "nothing to compare", False
            )
    if is_predicted(run) or is_predicted(base):
        if is_predicted(run) and is_predicted(base):
            words = "both predicted, not measured: measure them before deciding"
        else:
            words = (
                f"run {(run if is_predicted(run) else base).id} is predicted, not measured: measure it before deciding"
            )
        text = f"{label}: {pair_words(run, base, most=1)}; {words}."
        return Decision(run.id, text, "predicted", False)
    v, b = flat_metrics(run), flat_metrics(base)
    keys = [k for k, _ in SPEED_HEADLINES] + [k for k, _ in _quality_keys(v)]
    if verdicts is None:
        verdicts = verdicts_between(base, run, keys, (b, v), hints=run_hints(run))
    hints = run_hints(run)
    parts, judged = [], []
    for chosen in (_headline(SPEED_HEADLINES, v, b, verdicts), _headline(_quality_keys(v), v, b, verdicts)):
        said = None if chosen is None else phrase(chosen[0], chosen[1], b.get(chosen[1].key), hints)
        if chosen is not None and said:
            parts.append(said)
            judged.append(chosen)
    if not judged:
        return Decision(run.id, f"{label}: no shared figures to compare", "nothing to compare", False)
    grade, words, repeat = evidence([run, base], judged)
    return Decision(run.id, f"{label}: {', '.join(parts)}; {words}.", grade, repeat)


def repeat_specs(runs: Sequence[RunLike], baseline_id: int | None = None) -> list[JobSpec]:
    """The jobs that would make the comparison decision-grade (module doc): each compared measured run's spec
    again (a prediction is never re-queued), in :data:`REPEAT_TRIALS` interleaved rounds of one-trial jobs (the
    baseline first in each round: A B A B A B, the way a sweep interleaves trials,
    :func:`engine.spec.sweep.interleave_repeats`), each keeping the fingerprint of its recipe so its trials are
    found together. Raises SpecError for a stored spec that no longer validates (one line, naming the run)."""
    from engine.spec import SpecError, parse_job_spec
    from engine.spec.sweep import SweepPoint, interleave_repeats

    measured = [r for r in runs if not is_predicted(r)]
    ordered = sorted(measured, key=lambda r: r.id != baseline_id)  # stable: the compared order otherwise
    points = []
    for r in ordered:
        spec = dict(getattr(r, "spec", None) or {})
        workload = dict(spec.get("workload") or {})
        workload.update(trials=REPEAT_TRIALS, until_ci_pct=None, max_requests=None, max_seconds=None)
        spec["workload"] = workload
        name = getattr(r, "name", None)
        spec["name"] = f"{name} (repeat of run {r.id})" if name else f"repeat of run {r.id}"
        try:
            parse_job_spec(spec)
        except SpecError as exc:
            raise SpecError(f"run {r.id}'s spec cannot be queued again: {exc}") from exc
        points.append(SweepPoint("", spec))
    return [parse_job_spec(p.data) for p in interleave_repeats(points)]
