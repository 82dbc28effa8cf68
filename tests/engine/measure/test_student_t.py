"""The pure t quantile against scipy's."""

from __future__ import annotations

import pytest
from scipy.special import stdtrit

from engine.measure.student_t import t_quantile


@pytest.mark.parametrize("df", [1, 2, 5, 29, 30, 31, 45, 100, 999, 10_000, 1_000_000])
def test_the_95_percent_quantile_is_scipys(df: int) -> None:
    assert t_quantile(df, 0.975) == pytest.approx(float(stdtrit(df, 0.975)), rel=2e-8)


def test_other_quantiles_are_scipys() -> None:
    assert t_quantile(7, 0.95) == float(stdtrit(7, 0.95))
