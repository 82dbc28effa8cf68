"""The pure t quantile against scipy's."""

from __future__ import annotations

import pytest
from scipy.special import stdtrit

from engine.measure.student_t import t_quantile


def test_the_95_percent_quantile_is_scipys_at_every_sample_size() -> None:
    sizes = [*range(1, 1200), 2000, 5000, 10_000, 123_457, 10**6, 10**8]
    worst = max(abs(t_quantile(df, 0.975) / float(stdtrit(df, 0.975)) - 1) for df in sizes)
    assert worst < 2e-13


def test_other_quantiles_are_scipys() -> None:
    assert t_quantile(7, 0.95) == float(stdtrit(7, 0.95))
    assert t_quantile(70, 0.995) == pytest.approx(float(stdtrit(70, 0.995)), rel=1e-15)
