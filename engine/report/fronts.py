"""Pareto fronts that respect uncertainty and workload (pure): Explore's fronts and the report's.

- **Intervals on both axes** (:func:`with_intervals`): each run's stored 95 % interval of a speed
  figure, or value ± 1.96 standard errors of an accuracy figure, as ``KEY:lo`` / ``KEY:hi``
  columns (error bars and hover); a run without one has none.
- **The one verdict** (:mod:`engine.report.front_verdicts`): a run is off the front only when another
  is significantly better on one axis and not significantly worse on the other, by the
  verdict Compare gives that pair (:mod:`engine.report.verdict_matrix`, from the runs' stored records).
  Front runs with no significant difference on either axis are *tied* (within ± 5 %: Compare's "no
  significant difference"); those the data cannot tell apart are *not enough data*; both are ringed,
  never joined by the front's line as a trade-off.
- **Like with like** (:func:`front_groups`): a front is computed within one model and workload
  (what is sent: prompt and output lengths, batch, arrivals, traffic; not how many requests
  measured it); runs of other models or workloads get fronts of their own, named in words
  (:func:`group_labels`: a file by its name, never a hash or a field name), and
  :func:`group_differences` says what differs.
- **Measured only**: a predicted run (the serving simulator's, a frame's ``predicted`` column) never enters a
  front (:func:`split_predicted`); Explore may draw it apart, hollow and labelled predicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import pandas as pd

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry
from engine.report.front_verdicts import Record, interval_columns, judge
from engine.report.naming import short_model
from engine.report.recipes import workload_label, workload_words
from engine.report.values import band_of
from engine.report.verdict_matrix import paired_on_text

# Workload fields that say how much was measured, not what was sent: runs differing only in them share a front.
MEASUREMENT_FIELDS = frozenset(
    {
        "requests",
        "trials",
        "warmup_requests",
        "seed",
        "until_ci_pct",
        "until_metric",
        "max_requests",
        "max_seconds",
        "soak_minutes",
        "profile_steps",
        "max_error_rate",
    }
)


def with_intervals(
    frame: pd.DataFrame, keys: list[str], records: Mapping[int, tuple[JSONMapping, JSONMapping]]
) -> pd.DataFrame:
    """``frame`` with ``KEY:lo`` and ``KEY:hi`` for each of ``keys``, from each run's stored (metrics, quality)."""
    out = frame.copy()
    for key in dict.fromkeys(keys):
        if key not in out.columns:
            continue
        lows, highs = [], []
        for run_id, value in zip(out["run_id"], pd.to_numeric(out[key], errors="coerce"), strict=True):
            metrics, quality = records.get(int(run_id), ({}, {}))
            band = None if pd.isna(value) else band_of(SimpleNamespace(metrics=metrics, quality=quality), key, value)
            lows.append(np.nan if band is None else band[0])
            highs.append(np.nan if band is None else band[1])
        lo, hi = interval_columns(key)
        out[lo], out[hi] = lows, highs
    return out


def split_predicted(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured rows, predicted rows) of a runs frame, by its ``predicted`` column (absent: all measured)."""
    if frame.empty or "predicted" not in frame.columns:
        return frame, frame.iloc[0:0]
    flags = frame["predicted"].map(lambda v: _present(v) and bool(v)).astype(bool)
    return frame[~flags], frame[flags]


def _fields(row: JSONMapping) -> JSONObject:
    """A row's workload fields that say what was sent (how much was measured left out), whole numbers as ints."""
    return {
        k.removeprefix("workload."): int(v) if isinstance(v, float) and v.is_integer() else v
        for k, v in row.items()
        if k.startswith("workload.") and k.removeprefix("workload.") not in MEASUREMENT_FIELDS and _present(v)
    }


def workload_key(row: JSONMapping) -> str:
    """What a run sent, as an identity (``64→16`` and every field off its default, files and their content
    hash included): runs with one key share a front. Never shown: :func:`workload_label` says it in words."""
    fields = _fields(row)
    words = workload_words({**fields, "requests": "n"}).replace(" × n req", "")
    defaults = _workload_defaults()
    rest = sorted(
        f"{k.replace('_', ' ')} {v}"
        for k, v in fields.items()
        if k not in _IN_WORDS and (k not in defaults or defaults[k] != v)
    )
    return " · ".join([words, *rest])


_IN_WORDS = ("prompt_tokens", "output_tokens", "batch_size", "arrival", "rate", "max_concurrency")


@lru_cache(maxsize=1)
def _workload_defaults() -> JSONObject:
    from engine.spec import Workload

    return Workload().flat()


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def _group_rows(frame: pd.DataFrame) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """Each row's group key, and each key's (model, workload label) in words: the distinct (model, workload)
    combinations found by hashing the columns at once (``pd.factorize``), each said once."""
    work_cols = [c for c in frame.columns if c.startswith("workload.")]
    models = frame["model"].astype(str) if "model" in frame.columns else pd.Series("", index=frame.index)
    columns = pd.concat([models.rename("model"), frame[work_cols].astype(object)], axis=1)
    try:
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(columns.where(columns.notna(), None)))
        combos = [tuple(u) for u in uniques]
    except TypeError:  # a value that does not hash (a list in a knob): row by row, as distinct text
        texts = [tuple(repr(v) for v in row) for row in columns.itertuples(index=False)]
        codes_list, seen = [], {}
        for t in texts:
            codes_list.append(seen.setdefault(t, len(seen)))
        codes, combos = np.asarray(codes_list), [tuple(columns.iloc[texts.index(t)]) for t in seen]
    keys_of, words = [], {}
    for model, *values in combos:
        row = dict(zip(work_cols, values, strict=True))
        key = f"{model} · {workload_key(row)}"
        keys_of.append(key)
        words.setdefault(key, (short_model(str(model)), workload_label(_fields(row), _workload_defaults())))
    return [keys_of[c] for c in codes], words


def front_groups(frame: pd.DataFrame) -> pd.Series:
    """Each run's group (``model · workload``, an identity): a front is computed within one group."""
    if frame.empty:
        return pd.Series([], dtype=object)
    return pd.Series(_group_rows(frame)[0], index=frame.index, dtype=object)


def group_labels(frame: pd.DataFrame) -> dict[str, str]:
    """Each group's name in words for legends and warnings: ``demo (SmolLM2-135M-Instruct) · trace mooncake
    ×10 · conv.jsonl``; two groups that would read alike are numbered (``(2)``)."""
    if frame.empty:
        return {}
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for key, (model, work) in sorted(_group_rows(frame)[1].items()):
        text = f"{model} · {work}" if model else work
        seen[text] = seen.get(text, 0) + 1
        out[key] = text if seen[text] == 1 else f"{text} ({seen[text]})"
    return out


def group_differences(frame: pd.DataFrame) -> list[str]:
    """What differs between the groups of ``frame``, in words (``model: a, b``; ``workload: 64→16; 16→8``)."""
    if frame.empty:
        return []
    words = _group_rows(frame)[1]
    parts = []
    models = sorted({m for m, _ in words.values()})
    if len(models) > 1:
        parts.append("model: " + ", ".join(models[:4]) + (" ..." if len(models) > 4 else ""))
    workloads = sorted({w for _, w in words.values()})
    if len(workloads) > 1:
        parts.append("workload: " + "; ".join(workloads[:4]) + (" ..." if len(workloads) > 4 else ""))
    return parts


@dataclass(frozen=True)
class Fronts:
    """The fronts of a scatter: per group, its runs on the front (ordered by x), those tied with another
    front run, those the data cannot tell apart from one, and each group's name in words."""

    groups: dict[str, list[int]] = field(default_factory=dict)  # group -> run ids on the front, by x
    tied: dict[str, list[int]] = field(default_factory=dict)  # group -> no significant difference (within ± 5 %)
    unclear: dict[str, list[int]] = field(default_factory=dict)  # group -> not enough data to tell apart
    differences: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # group -> its name in words
    approximate: list[str] = field(default_factory=list)  # groups too large to judge pair by pair
    paired: tuple[str, ...] = ()  # axes whose runs all pair (perplexity on one text): their own bands mislead

    def run_ids(self) -> list[int]:
        """Every run on a front (ties included), group by group."""
        return [i for g in self.groups for i in self.groups[g]]

    def ringed(self, group: str) -> set[int]:
        """The runs of a group's front that are not a clear trade-off: tied or not enough data."""
        return {*self.tied.get(group, []), *self.unclear.get(group, [])}


def _direction(key: str, hints: Mapping[str, str] | None, given: bool | None) -> bool | None:
    if given is not None:
        return given
    metric = registry.lookup(key, (hints or {}).get(key))
    return metric.minimise if metric.is_metric else None


def pareto_fronts(
    frame: pd.DataFrame,
    x: str,
    y: str,
    hints: Mapping[str, str] | None = None,
    minimise: tuple[bool | None, bool | None] = (None, None),
    records: Mapping[int, Record] | None = None,
) -> Fronts:
    """The fronts of ``x`` against ``y``, one per model and workload; directions from the registry unless
    ``minimise`` gives them (no front on an axis that is not a metric). ``records`` (each run's stored
    (metrics, quality), as Explore reads them) give the verdicts everything Compare has but the raw
    requests; without them the frame's figures and ``KEY:lo``/``KEY:hi`` intervals are used. Predicted rows are
    left out: a front is measured."""
    frame = split_predicted(frame)[0]
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return Fronts()
    mx, my = _direction(x, hints, minimise[0]), _direction(y, hints, minimise[1])
    if mx is None or my is None:
        return Fronts()
    data = frame[pd.to_numeric(frame[x], errors="coerce").notna() & pd.to_numeric(frame[y], errors="coerce").notna()]
    groups = front_groups(data)
    shown = [records[int(i)] for i in data["run_id"] if int(i) in (records or {})]
    paired = tuple(k for k in (x, y) if k == "quality.perplexity" and len(shown) == len(data) and paired_on_text(shown))
    out = Fronts(differences=group_differences(data), labels=group_labels(data), paired=paired)
    for name in sorted(groups.unique().tolist()):
        part = data[groups == name]
        judged = judge(part, (x, y), records or {}, hints, (mx, my))
        out.groups[name] = [int(i) for i in part[judged.front].sort_values([x, y])["run_id"]]
        out.tied[name] = [int(i) for i in part[judged.tied]["run_id"]]
        out.unclear[name] = [int(i) for i in part[judged.unclear]["run_id"]]
        if judged.approximate:
            out.approximate.append(name)
    return out
