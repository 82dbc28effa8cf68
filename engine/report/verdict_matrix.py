"""The verdict between every pair of many runs at once (Explore's fronts), as matrices.

``state_matrix(key, values, records)[i, j]`` is the state of run j against run i as the baseline:
exactly what :func:`engine.report.verdicts.verdicts_between` says for that pair without raw samples
(a test checks it pair by pair): speed figures from the two stored intervals on the log scale,
perplexity paired where both runs scored the same text (the block bootstrap's draws, shared by every
run of one text, are made once), task scores paired on the same examples, other accuracy figures by
their two standard errors; then :func:`engine.report.verdicts.classify` with its one margin. A figure
declared without any interval (memory, load time) gets no verdict in Compare; here it is taken as
exact, its values compared as they are. States are small integers (:data:`STATES`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from engine.jsonvalue import JSONMapping
from engine.measure import registry, stats
from engine.report.values import interval, sample_count
from engine.report.verdicts import EQUIVALENCE_MARGIN, STDERR_MULTIPLE, stored_stderr

STATES = ("better", "worse", "same", "unclear", "thin", "none")
BETTER, WORSE, SAME, UNCLEAR, THIN, NONE = range(6)
Record = tuple[JSONMapping, JSONMapping]  # a run's stored (metrics, quality)


def classify(lo: np.ndarray, hi: np.ndarray, minimise: bool) -> np.ndarray:
    """:func:`engine.report.verdicts.classify` over arrays of interval ends."""
    out = np.full(lo.shape, UNCLEAR, dtype=np.int8)
    out[(lo >= 1.0 / (1.0 + EQUIVALENCE_MARGIN)) & (hi <= 1.0 + EQUIVALENCE_MARGIN)] = SAME
    out[lo > 1.0] = WORSE if minimise else BETTER
    out[hi < 1.0] = BETTER if minimise else WORSE
    return out


def _pairs(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, run) views of a per-run array: ``[i, j]`` is run i's and run j's value."""
    return row[:, None], row[None, :]


def _exact(values: np.ndarray, minimise: bool) -> np.ndarray:
    b, v = _pairs(values)
    out = np.full((values.size, values.size), SAME, dtype=np.int8)
    better = v < b if minimise else v > b
    out[better] = BETTER
    out[(v != b) & ~better] = WORSE
    return out


def _speed(key: str, values: np.ndarray, records: Sequence[Record], minimise: bool) -> np.ndarray:
    """:func:`engine.report.verdicts.speed_verdict` without samples: counts, then the stored intervals."""
    from scipy.stats import norm

    ends = [stats.from_pair(interval(m, key)) for m, _ in records]
    lo = np.array([np.nan if e is None else e.lo for e in ends])
    hi = np.array([np.nan if e is None else e.hi for e in ends])
    z = float(norm.ppf(0.5 + stats.CONFIDENCE / 2))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        (b, v), (lb, lv), (hb, hv) = _pairs(values), _pairs(lo), _pairs(hi)
        ratio = v / b
        se = np.hypot(np.log(hb / lb), np.log(hv / lv)) / (2 * z)
        out = classify(ratio * np.exp(-z * se), ratio * np.exp(z * se), minimise)
        usable = np.isfinite(lb) & np.isfinite(lv) & (np.minimum(np.minimum(b, v), np.minimum(lb, lv)) > 0)
    out[~(usable & np.isfinite(ratio))] = NONE
    metric = registry.lookup(key)
    if metric.group is not None and metric.stat not in (None, "mean"):
        need = stats.min_samples(float(str(metric.stat).removeprefix("p")))
        counts = [sample_count(m, metric.group) for m, _ in records]
        short = np.array([c is not None and c < need for c in counts])
        out[short[:, None] | short[None, :]] = THIN
    return out


def _difference(values: np.ndarray, delta: np.ndarray, se: np.ndarray, minimise: bool) -> np.ndarray:
    """:func:`engine.report.verdicts.difference_verdict`: ``delta`` ± 2 ``se`` against each baseline value."""
    base = np.broadcast_to(values[:, None], delta.shape)
    half = STDERR_MULTIPLE * se
    with np.errstate(divide="ignore", invalid="ignore"):
        out = classify((base + delta - half) / base, (base + delta + half) / base, minimise)
    zero = base <= 0
    out[zero & (np.abs(delta) <= half)] = UNCLEAR
    out[zero & (np.abs(delta) > half)] = np.where((delta < 0) == minimise, BETTER, WORSE)[zero & (np.abs(delta) > half)]
    return out


def _unpaired(key: str, values: np.ndarray, records: Sequence[Record], minimise: bool) -> np.ndarray:
    errors = np.array([np.nan if (e := stored_stderr(q, key)) is None else e for _, q in records])
    b, v = _pairs(values)
    eb, ev = _pairs(errors)
    out = _difference(values, v - b, np.hypot(eb, ev), minimise)
    out[~(np.isfinite(eb) & np.isfinite(ev))] = NONE
    return out


def _perplexity_groups(records: Sequence[Record]) -> dict[tuple[str, str, str], list[int]]:
    """Runs that pair (engine.report.paired.perplexity_ratio): the same text, block size and block tokens."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, (_, quality) in enumerate(records):
        blocks = (quality or {}).get("perplexity_blocks")
        if not isinstance(blocks, Mapping) or not blocks.get("text") or not isinstance(blocks.get("tokens"), list):
            continue
        signature = (str(blocks["text"]), repr(blocks.get("block_tokens")), repr(blocks["tokens"]))
        groups.setdefault(signature, []).append(i)
    return groups


def paired_on_text(records: Sequence[Record]) -> bool:
    """Whether every run of ``records`` pairs with another on perplexity (all scored one text): then each run's
    own band (± 1.96 standard errors of the text's sampling) is not what the verdicts between them compare."""
    groups = _perplexity_groups(records)
    return bool(records) and sum(len(m) for m in groups.values() if len(m) > 1) == len(records)


def _block_rows(records: Sequence[Record], members: list[int]) -> tuple[list[int], np.ndarray, np.ndarray] | None:
    """The members whose per-block NLL a paired ratio can use, their NLL rows and the block tokens."""
    blocks = records[members[0]][1]["perplexity_blocks"]
    try:
        tokens = np.asarray(blocks["tokens"], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if tokens.size == 0 or not np.isfinite(tokens).all() or float(tokens.sum()) <= 0:
        return None
    kept, rows = [], []
    for i in members:
        try:
            nll = np.asarray(records[i][1]["perplexity_blocks"].get("nll") or [], dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if nll.shape == tokens.shape and np.isfinite(nll).all():
            kept.append(i)
            rows.append(nll)
    return (kept, np.stack(rows), tokens) if len(kept) > 1 else None


def _paired_perplexity(out: np.ndarray, records: Sequence[Record], minimise: bool) -> None:
    """Overwrite the pairs that scored the same text with the paired block-bootstrap verdict."""
    for signature, members in _perplexity_groups(records).items():
        found = _block_rows(records, members)
        if found is None:
            continue
        kept, nll, tokens = found
        idx = np.array(kept)
        totals = np.array([float(row.sum()) for row in nll])
        value = np.exp((totals[None, :] - totals[:, None]) / float(tokens.sum()))
        if tokens.size < 2:
            out[np.ix_(idx, idx)] = THIN
            continue
        sums, token_sums = stats.block_resample_sums(nll, tokens, zlib.crc32(signature[0].encode()))
        for k, i in enumerate(kept):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                ratios = np.exp((sums - sums[k]) / token_sums)
            if np.isfinite(ratios).all():
                alpha = (1 - stats.CONFIDENCE) / 2
                lo, hi = np.quantile(ratios, [alpha, 1 - alpha], axis=1)
            else:  # a resample overflowed: the pair's own way of dropping it
                pairs = [stats.block_ratio(float(value[k, m]), sums[k], sums[m], token_sums) for m in range(len(kept))]
                lo, hi = (np.array([p.interval.lo for p in pairs]), np.array([p.interval.hi for p in pairs]))
            lo, hi = np.minimum(lo, value[k]), np.maximum(hi, value[k])
            out[i, idx] = classify(lo, hi, minimise)


def _paired_task(out: np.ndarray, name: str, values: np.ndarray, records: Sequence[Record], minimise: bool) -> None:
    """Overwrite the pairs scored on the same examples with the paired per-example verdict."""
    groups: dict[str, list[tuple[int, np.ndarray]]] = {}
    for i, (_, quality) in enumerate(records):
        digest, marks = (quality or {}).get(f"{name}:examples"), (quality or {}).get(f"{name}:correct")
        if digest and isinstance(marks, str) and marks:
            try:
                groups.setdefault(str(digest), []).append((i, np.array([int(c) for c in marks], dtype=np.float64)))
            except ValueError:
                continue
    for members in groups.values():
        for i, base in members:
            same = [(j, m) for j, m in members if m.shape == base.shape]
            idx = np.array([j for j, _ in same])
            d = np.stack([m for _, m in same]) - base
            if d.shape[1] < 2 or not np.isfinite(values[i]):
                out[i, idx] = THIN
                continue
            se = d.std(ddof=1, axis=1) / np.sqrt(d.shape[1])
            out[i, idx] = _difference(values[[i]], d.mean(axis=1)[None, :], se[None, :], minimise)[0]


def state_matrix(
    key: str,
    values: Sequence[float | None],
    records: Sequence[Record],
    hints: Mapping[str, str] | None = None,
    minimise: bool | None = None,
) -> np.ndarray:
    """The state of every run against every other on ``key`` (module doc): ``[i, j]`` is run j against
    baseline run i; ``records`` are the runs' stored (metrics, quality), ``values`` their figures."""
    v = np.array([np.nan if x is None else float(x) for x in values], dtype=np.float64)
    metric = registry.lookup(key, (hints or {}).get(key))
    lower = metric.minimise if minimise is None else minimise
    if key.startswith("quality."):
        out = _unpaired(key, v, records, lower)
        name = key.removeprefix("quality.")
        if name == "perplexity":
            _paired_perplexity(out, records, lower)
        elif name.startswith("task:") and name.count(":") == 1:
            _paired_task(out, name, v, records, lower)
    elif metric.group is not None or metric.interval is not None:
        out = _speed(key, v, records, lower)
    else:
        out = _exact(v, lower)
    missing = ~np.isfinite(v)
    if key.startswith("quality.") or metric.group is None:
        out[missing[:, None] | missing[None, :]] = NONE
    return out
