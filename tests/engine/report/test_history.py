"""History of a fingerprint: change points on synthetic series with a known step, bands, what changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
from seed_runs import make_run, real_quality

from engine.report.history import (
    band_of,
    build_history,
    change_points,
    history,
    history_figure,
    metric_choices,
    stored_interval,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _run(i: int, tpot: float, commit: str = "aaa", torch: str = "2.13.0", ci: list | None = None, quality=None):
    stats = {"p50": tpot, "mean": tpot, **({"ci": {"p50": ci}} if ci else {})}
    return SimpleNamespace(
        id=i,
        created_at=T0 + timedelta(days=i),
        metrics={"tpot_ms": stats, "output_tokens_per_s": 1000 / tpot},
        quality=quality,
        provenance={"git_commit": commit, "packages": {"torch": torch}, "host": "box"},
        device_name="test CPU",
    )


def test_a_step_in_a_noisy_series_is_found_where_it_is():
    rng = np.random.default_rng(0)
    series = np.concatenate([rng.normal(50, 1.5, 10), rng.normal(58, 1.5, 10)])
    assert change_points(series) == [10]


def test_noise_alone_has_no_change_point():
    rng = np.random.default_rng(1)
    assert change_points(rng.normal(50, 2.0, 25)) == []


def test_two_steps_and_short_series():
    assert change_points([10, 10, 10, 20, 20, 20, 12, 12, 12]) == [3, 6]
    assert change_points([10, 20, 30]) == []  # fewer than two segments of the minimum size


def test_change_points_are_marked_with_what_changed_between_the_runs():
    runs = [_run(i, 50 + 0.3 * (i % 3)) for i in range(8)]
    runs += [_run(8 + i, 70 + 0.3 * (i % 3), commit="bbb", torch="2.14.0") for i in range(8)]
    h = build_history("fp", "tpot_ms_p50", list(reversed(runs)))  # any order: sorted by time
    assert [p.run_id for p in h.points] == list(range(16))
    (cp,) = h.change_points
    assert (cp.index, cp.before_run, cp.after_run) == (8, 7, 8)
    assert cp.changes == ["git aaa → bbb", "torch 2.13.0 → 2.14.0"]
    assert 35 < cp.change_pct < 45 and "between run 7 and run 8: git aaa → bbb" in cp.words()


def test_a_change_point_with_nothing_recorded_says_so():
    runs = [_run(i, 50.0 if i < 4 else 60.0) for i in range(8)]
    (cp,) = build_history("fp", "tpot_ms_p50", runs).change_points
    assert cp.changes == [] and "nothing recorded changed" in cp.words()


def test_bands_come_from_stored_intervals_or_stderr_and_may_be_absent():
    with_ci = _run(1, 50.0, ci=[48.0, 53.0])
    assert band_of(with_ci, "tpot_ms_p50", 50.0) == (48.0, 53.0)
    assert band_of(_run(2, 50.0), "tpot_ms_p50", 50.0) is None  # a run stored before intervals existed
    assert stored_interval({"ci": {"output_tokens_per_s": [9, 11]}}, "output_tokens_per_s") == (9.0, 11.0)
    assert stored_interval({"tpot_ms": {"p99": 3.0, "ci": {"p99": None}}}, "tpot_ms_p99") is None  # n too small
    q = real_quality(perplexity=20.0)
    lo, hi = band_of(SimpleNamespace(quality=q), "quality.perplexity", 20.0)
    assert lo < 20.0 < hi and abs((hi - lo) / 2 - 1.96 * q["perplexity_stderr"]) < 1e-3


def test_the_figure_has_bands_points_segments_and_a_marked_change():
    runs = [_run(i, 50.0 if i < 5 else 65.0, ci=[45.0, 70.0], commit="aaa" if i < 5 else "bbb") for i in range(10)]
    fig = history_figure(build_history("fp", "tpot_ms_p50", runs)).to_dict()
    names = [t.get("name") for t in fig["data"]]
    assert "95 % interval" in names and names.count("segment mean") == 2
    assert len(fig["layout"]["shapes"]) == 1 and "git aaa → bbb" in fig["layout"]["annotations"][0]["text"]


def test_history_from_the_database_and_its_metric_choices(db):
    for i, tpot in enumerate((10, 10, 10, 14, 14, 14)):
        prov = {"git_commit": "c1" if i < 3 else "c2", "host": "test"}
        make_run(db, tpot_ms=tpot, seed=i, quality=real_quality(), provenance=prov)
    make_run(db, dtype="bfloat16")  # another fingerprint
    h = history(db, _fingerprint(db), "tpot_ms_p50")
    assert len(h.points) == 6 and [c.changes for c in h.change_points] == [["git c1 → c2"]]
    choices = metric_choices([SimpleNamespace(metrics=_run(0, 5.0).metrics, quality=real_quality())])
    assert choices[:2] == ["tpot_ms_p50", "output_tokens_per_s"] and "quality.perplexity" in choices


def _fingerprint(db) -> str:
    from storage.suites import fingerprints

    return max(fingerprints(db), key=lambda f: f.runs).fingerprint
