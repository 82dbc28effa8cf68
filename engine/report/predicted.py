"""Predicted runs in the reports: their prediction in words, and a prediction checked against a measured run.

A predicted run (the serving simulator's: ``storage.runs`` ``predicted``, read by
:func:`engine.report.runlike.is_predicted`) has a measured run's records and metrics; its provenance's
``prediction`` names the hardware, the tensor parallelism, the calibration's label and its band: the
leave-one-out median absolute error per headline figure (``band["median_abs_error_pct"]``: TTFT p50 and p90,
TPOT p50, E2E p90, throughput), None when uncalibrated ("no band claimed"). Its name says where it was
predicted (:func:`engine.report.naming.run_name`: ``... · predicted on NVIDIA H100 SXM``).

A simulation has no sampling noise, so a pair with a predicted run gets no significance test
(:func:`engine.report.verdicts.verdicts_between`). A predicted run beside a measured one gets its error instead
(:class:`Check`: the measured figure, the predicted one, predicted ÷ measured − 1, and whether that lies within the
band); two predicted runs get their plain change, said as a prediction. Compare's section, its summary and
decision lines, the HTML report and the CSV say these words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from engine.jsonvalue import JSONMapping
from engine.measure import registry
from engine.report.runlike import is_predicted
from engine.report.values import flat_metrics
from engine.report.verdict_words import change_words
from engine.report.verdicts import NO_TEST

if TYPE_CHECKING:
    from engine.report.runlike import RunLike

BADGE = "PREDICTED"
TITLE = "Predicted, not measured"
NO_BAND = "no band claimed"
NOT_PREDICTED = "not predicted (the serving simulator predicts latency and throughput only)"
# The figures a prediction's band is stated for (engine.whatif.predict.fitting.HEADLINE), by metric key, with
# their name in a sentence, in the order they are said.
BAND_KEYS: dict[str, tuple[str, str]] = {
    "tpot_ms_p50": ("tpot_p50", "decode"),
    "ttft_ms_p50": ("ttft_p50", "first token"),
    "ttft_ms_p90": ("ttft_p90", "first token p90"),
    "e2el_ms_p90": ("e2el_p90", "end-to-end p90"),
    "output_tokens_per_s": ("throughput", "throughput"),
}
SAID = ("tpot_ms_p50", "ttft_ms_p50", "output_tokens_per_s")  # in a summary or decision line


def prediction_of(run: object) -> JSONMapping:
    """A run's ``provenance["prediction"]`` (empty for a measured run)."""
    provenance = getattr(run, "provenance", None)
    found = provenance.get("prediction") if isinstance(provenance, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def hardware_words(run: object) -> str:
    """Where a run was predicted: its device name (``2 x NVIDIA H100 SXM`` for a tensor-parallel group)."""
    prediction = prediction_of(run)
    for value in (getattr(run, "device_name", None), prediction.get("hardware_name"), getattr(run, "device", None)):
        if isinstance(value, str) and value.strip():
            return value
    return "unknown hardware"


def predicted_on(run: object) -> str:
    """``predicted on NVIDIA H100 SXM``: what a predicted run's name ends with."""
    return f"predicted on {hardware_words(run)}"


def run_link(run_id: object, predicted: bool) -> str:
    """A run's page, relative: ``run?run=12``; a predicted run's says so (``run?run=12&predicted=1``)."""
    return f"run?run={run_id}" + ("&predicted=1" if predicted else "")


def _number(value: object) -> float | None:
    return registry.finite(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def band_pct(prediction: JSONMapping, key: str) -> float | None:
    """The band (LOO median absolute error, %) the prediction claims for a metric key; None: none claimed."""
    band = prediction.get("band")
    if key not in BAND_KEYS or not isinstance(band, Mapping):
        return None
    name = BAND_KEYS[key][0]
    errors = band.get("median_abs_error_pct")
    if isinstance(errors, Mapping) and name in errors:
        return _number(errors[name])
    return _number(band.get(f"{name}_pct"))


def _pct(value: float) -> str:
    return f"{value:.2g}" if value < 100 else f"{value:,.0f}"


def band_words(prediction: JSONMapping) -> str:
    """``band (leave-one-out median error): TPOT p50 ±10 %, TTFT p50 ±4 % ... (3 runs)``, or "no band claimed"."""
    parts = [
        f"{'throughput' if key == 'output_tokens_per_s' else registry.lookup(key).short} ±{_pct(pct)} %"
        for key in BAND_KEYS
        if (pct := band_pct(prediction, key)) is not None
    ]
    if not parts:
        return NO_BAND
    band = prediction.get("band")
    runs = band.get("n_runs") if isinstance(band, Mapping) else None
    return "band (leave-one-out median error): " + ", ".join(parts) + (f" ({runs} runs)" if runs else "")


def prediction_lines(run: object) -> list[str]:
    """What a predicted run's banner says: its calibration's label, its band, the hardware and tensor parallelism."""
    prediction = prediction_of(run)
    tp = prediction.get("tp")
    return [
        str(prediction.get("label") or "no calibration label recorded"),
        band_words(prediction),
        f"hardware: {prediction.get('hardware_name') or hardware_words(run)}"
        + (f" ({prediction.get('hardware')})" if prediction.get("hardware") else "")
        + f" · tensor parallel {tp if tp is not None else 1}",
    ]


@dataclass(frozen=True)
class Check:
    """One figure of a predicted run against the measured one: predicted ÷ measured − 1, beside the band."""

    key: str
    measured: float
    predicted: float
    band: float | None  # %, None: no band claimed

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    @property
    def within(self) -> bool | None:
        """Whether the error lies within the band (None: no band claimed)."""
        return None if self.band is None else abs(self.error) * 100 <= self.band

    def error_words(self) -> str:
        """``+4.2 %``, ``-37 %``."""
        pct = self.error * 100
        return "±0 %" if abs(pct) < 0.05 else f"{'+' if pct > 0 else '-'}{_pct(abs(pct))} %"

    def band_said(self) -> str:
        """``band ±10 %, within it``, ``band ±4 %, outside it``, or "no band claimed"."""
        if self.band is None:
            return NO_BAND
        return f"band ±{_pct(self.band)} %, {'within' if self.within else 'outside'} it"

    def words(self) -> str:
        """``decode: predicted vs measured +4.2 % (band ±10 %, within it)``."""
        return f"{BAND_KEYS[self.key][1]}: predicted vs measured {self.error_words()} ({self.band_said()})"


def roles(run: RunLike, base: RunLike) -> tuple[RunLike, RunLike] | None:
    """(predicted, measured) when exactly one of the pair is predicted, else None."""
    if is_predicted(run) == is_predicted(base):
        return None
    return (run, base) if is_predicted(run) else (base, run)


def checks(predicted: RunLike, measured: RunLike) -> list[Check]:
    """The prediction's headline figures against the measured run's, where both have them."""
    p, m = flat_metrics(predicted), flat_metrics(measured)
    prediction = prediction_of(predicted)
    out = []
    for key in BAND_KEYS:
        pv, mv = p.get(key), m.get(key)
        if pv is not None and mv is not None and mv > 0:
            out.append(Check(key, mv, pv, band_pct(prediction, key)))
    return out


@dataclass(frozen=True)
class PairCheck:
    """A predicted run against a measured one: its checks, and whether the measured run is its twin (same spec)."""

    predicted_id: int
    measured_id: int
    checks: list[Check]
    twin: bool

    def heading(self) -> str:
        """``run 5 (predicted) against run 4, its measured twin (the same spec)``."""
        other = "its measured twin (the same spec)" if self.twin else "a measured run of another spec"
        return f"run {self.predicted_id} (predicted) against run {self.measured_id}, {other}"


def pair_check(run: RunLike, base: RunLike) -> PairCheck | None:
    """The check of a pair with exactly one predicted run (None otherwise)."""
    found = roles(run, base)
    if found is None:
        return None
    predicted, measured = found
    fingerprint = getattr(predicted, "fingerprint", None)
    twin = bool(fingerprint) and fingerprint == getattr(measured, "fingerprint", None)
    return PairCheck(predicted.id, measured.id, checks(predicted, measured), twin)


def within_words(found: Sequence[Check]) -> str:
    """``3 of 5 figures within the band``, or why the error is not judged."""
    judged = [c for c in found if c.within is not None]
    if not judged:
        return f"{NO_BAND}: the errors are not judged"
    return f"{sum(bool(c.within) for c in judged)} of {len(judged)} figures within the band"


def pair_words(run: RunLike, base: RunLike, most: int = len(SAID)) -> str:
    """A pair with a predicted run in one phrase, said as a prediction: its error against the measured run
    (one predicted), or the plain change (both predicted), for at most ``most`` of decode, first token and
    throughput; no significance test either way."""
    found = roles(run, base)
    if found is None:
        v, b = flat_metrics(run), flat_metrics(base)
        parts = [
            f"{change_words(key, v[key] / b[key])} {BAND_KEYS[key][1]}"
            for key in SAID
            if v.get(key) is not None and b.get(key)
        ]
        said = ", ".join(parts[:most]) or "no shared figures"
        return f"both predicted: {said} ({NO_TEST})"
    predicted, measured = found
    said = [c.words() for c in checks(predicted, measured) if c.key in SAID][:most]
    head = f"prediction (run {predicted.id}) vs measurement (run {measured.id})"
    return f"{head}: " + ("; ".join(said) if said else "no shared figures") + f" ({NO_TEST})"


def other_differences(run: RunLike, base: RunLike, differences: Sequence[str]) -> list[str]:
    """What differs between a pair besides the recipe, less the hardware and device when one is predicted: a
    prediction's hardware is in its name, and its error is what the pair is for."""
    if not (is_predicted(run) or is_predicted(base)):
        return list(differences)
    return [d for d in differences if not d.startswith(("hardware ", "device "))]


def with_prediction_columns(frame: pd.DataFrame, runs: Sequence[object]) -> pd.DataFrame:
    """A runs frame of predicted runs with each one's ``prediction`` (its calibration label) and ``band`` in words,
    read from ``runs`` (their provenance): what Explore's CSV and report say beside the ``predicted`` column."""
    found = {int(getattr(r, "id", 0)): prediction_of(r) for r in runs}
    out = frame.copy()
    if out.empty:
        return out
    ids = [int(i) for i in out["run_id"]]
    out["prediction"] = [str(found.get(i, {}).get("label") or "") for i in ids]
    out["band"] = [band_words(found.get(i, {})) for i in ids]
    return out


def check_frame(pair: PairCheck) -> pd.DataFrame:
    """Compare's table of a prediction against a measured run: a row per figure, both values, the error, the band."""
    rows = []
    predicted_id, measured_id = pair.predicted_id, pair.measured_id
    for c in pair.checks:
        metric = registry.lookup(c.key)
        rows.append(
            {
                "figure": metric.label,
                f"measured (run {measured_id})": metric.format(c.measured),
                f"predicted (run {predicted_id})": metric.format(c.predicted),
                "error (predicted ÷ measured − 1)": c.error_words(),
                "band (LOO median error)": NO_BAND if c.band is None else f"±{_pct(c.band)} %",
                "within the band": "–" if c.within is None else ("yes" if c.within else "no"),
            }
        )
    return pd.DataFrame(rows)
