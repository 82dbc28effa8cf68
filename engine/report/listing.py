"""Runs listed for people: the Runs table in words, and Explore's axis and colour choices.

Works on frames from storage.frames (one row per run; the Runs page's carry ``knobs``, each
run's changes from the defaults). Only what differs from the defaults is named. A predicted run's row
carries the PREDICTED badge (its ``predicted`` column) and a link that says it is predicted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry
from engine.report.figures import PERF_KINDS, frame_hints
from engine.report.naming import changes_in_words
from engine.report.predicted import BADGE, run_link
from engine.report.recipes import workload_words

GROUP_COLUMNS: tuple[str, ...] = ("model", "engine", "device", "device_name", "sweep")
MAX_COLOURS = 12  # more groups than this are lumped into "other" by the scatter
EXPLORE_POINTS = 20_000  # Explore draws the newest this many matching runs; a filter narrows to the others
TABLE_COLUMNS: tuple[str, ...] = (
    "link",
    "predicted",
    "created_at",
    "model",
    "engine",
    "device",
    "recipe",
    "workload",
    "ttft_ms_p50",
    "tpot_ms_p50",
    "output_tokens_per_s",
    "accuracy",
    "status",
    "noise",
)


def plural(n: int, word: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def accuracy_words(row: pd.Series) -> str:
    """The accuracy headline of a run: perplexity and KL vs the reference, else top-1, else its first task."""
    parts = []
    for key, short in (("quality.perplexity", "ppl"), ("quality.kl_mean", "KL"), ("quality.top1_agreement", "top-1")):
        value = row.get(key)
        if _present(value):
            parts.append(f"{short} {registry.lookup(key).format(value)}")
        if len(parts) == 2:
            break
    if not parts:
        tasks = [k for k in row.index if k.startswith("quality.task:") and not k.endswith(":kind")]
        for key in tasks:
            if _present(row.get(key)):
                metric = registry.lookup(key, row.get(f"{key}:kind"))
                parts.append(f"{metric.short or metric.label} {metric.format(row[key])}")
                break
    return " · ".join(parts)


def status_words(status: object, error: object, row: Mapping[str, object]) -> str:
    """``done``, ``done · 2 of 8 requests failed (25 %)``, ``failed: out of memory`` (never "None")."""
    if status != "done":
        reason = error if isinstance(error, str) and error.strip() else "no reason recorded"
        return f"{status}: {reason}"
    counts = {k: row.get(k) for k in ("completed", "failed", "error_rate") if _present(row.get(k))}
    failing = registry.failure_words(counts)
    return f"done · {failing}" if failing else "done"


FIGURES: tuple[str, ...] = ("ttft_ms_p50", "tpot_ms_p50", "output_tokens_per_s")


def _number(key: str, value: float | None) -> str:
    """A figure as text in its registry unit, without the unit (the header has it); blank when missing."""
    return registry.bare_number(registry.lookup(key), float(value)) if _present(value) else ""


def _part(row: JSONMapping, prefix: str) -> JSONObject:
    return {k.removeprefix(prefix): v for k, v in row.items() if k.startswith(prefix) and _present(v)}


def runs_table(page: pd.DataFrame) -> pd.DataFrame:
    """The Runs page's table: one row per run, the PREDICTED badge on predicted ones (``predicted``), recipe and
    workload in words, status with its reason."""
    if page.empty:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    rows = page.to_dict("records")
    predicted = [_present(r.get("predicted")) and bool(r.get("predicted")) for r in rows]
    out = pd.DataFrame(
        {
            "link": [run_link(r["run_id"], p) for r, p in zip(rows, predicted, strict=True)],
            "predicted": [BADGE if p else "" for p in predicted],
            "created_at": page["created_at"],
            "model": page["model"],
            "engine": page["engine"],
            "device": page["device"],
            "recipe": [changes_in_words((r.get("knobs") or {}).get("recipe"), r.get("engine")) for r in rows],
            "workload": [workload_words(_part(r, "workload.")) for r in rows],
            **{key: [_number(key, r.get(key)) for r in rows] for key in FIGURES},
            "accuracy": [accuracy_words(pd.Series(r)) for r in rows],
            "status": [status_words(r["status"], r.get("error"), r) for r in rows],
            "noise": [f"⚠ {r['noise']}" if isinstance(r.get("noise"), str) and r["noise"] else "" for r in rows],
        }
    )
    out["run_id"] = page["run_id"].to_numpy()
    return out


# -- Explore -------------------------------------------------------------------------------
def axis_choices(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(latency/throughput/memory, accuracy): registry metrics with a number in at least one shown run."""
    hints = frame_hints(frame)

    def present(keys: list[str]) -> list[str]:
        kept = [k for k in keys if pd.to_numeric(frame[k], errors="coerce").notna().any()]
        return sorted(kept, key=registry.display_rank)

    if frame.empty:
        return [], []
    return (
        present(registry.metric_keys(frame.columns, PERF_KINDS, hints)),
        present(registry.metric_keys(frame.columns, ("accuracy",), hints)),
    )


def colour_columns(frame: pd.DataFrame) -> list[str]:
    """What a scatter can be coloured by: identity columns, then recipe knobs, then workload fields."""
    present = set(frame.columns)
    knobs = sorted(c for c in present if c.startswith("recipe."))
    work = sorted(c for c in present if c.startswith("workload."))
    return [c for c in GROUP_COLUMNS if c in present] + knobs + work


def _distinct(column: pd.Series) -> int:
    try:
        return int(column.nunique(dropna=False))
    except TypeError:  # unhashable values (lists): compare their text
        return int(column.astype(str).nunique())


def default_colour(frame: pd.DataFrame) -> str:
    """The knob that varies most among the shown runs (at most :data:`MAX_COLOURS` values preferred); "" if none.

    Recipe knobs come first on ties, then model/engine/device, then workload fields.
    """
    if frame.empty:
        return ""
    columns = colour_columns(frame)
    ranked = sorted(columns, key=lambda c: 0 if c.startswith("recipe.") else 2 if c.startswith("workload.") else 1)
    counts = {c: _distinct(frame[c]) for c in ranked}
    fitting = [c for c in ranked if 1 < counts[c] <= MAX_COLOURS]
    if fitting:
        return max(fitting, key=lambda c: counts[c])  # max keeps the first of equals: the ranking's order
    many = [c for c in ranked if counts[c] > MAX_COLOURS]
    return min(many, key=lambda c: counts[c]) if many else ""
