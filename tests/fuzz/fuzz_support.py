"""What the fuzz suites share: the tally of cases, value strategies, and outcome checks."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

from hypothesis import strategies as st

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# How many examples each page gets (AppTest runs a whole page: ~0.5-2 s each).
PAGE_EXAMPLES = {"ci": 20, "long": 300}.get(PROFILE, 20)

TALLY: dict[str, Counter] = defaultdict(Counter)


def record(suite: str, outcome: str) -> None:
    """Count one case of ``suite`` (cli, url, spec-file, spec, fault) that ended as ``outcome``."""
    TALLY[suite]["tried"] += 1
    TALLY[suite][outcome] += 1


HUGE = st.integers(min_value=2**63, max_value=10**40).map(str)
UNICODE_DIGITS = st.sampled_from(["²", "٣", "１２", "1_0", "߁", "Ⅻ", "৩", "1\u0660", "𝟙"])
NUMBERS_AS_TEXT = st.sampled_from(["nan", "NaN", "inf", "-inf", "1e999", "-1e999", "0", "-1", "1.5", "1e3", "0x10", ""])

# Values a user might type anywhere: huge and unicode numbers, nan/inf, empty, separators, text.
VALUE = st.one_of(
    HUGE,
    UNICODE_DIGITS,
    NUMBERS_AS_TEXT,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.lists(st.one_of(st.integers(-3, 12).map(str), HUGE, UNICODE_DIGITS, st.just("")), max_size=4).map(",".join),
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.sampled_from([" ", "\n", "none", "null", "true", "a,b", ",,", "../..", "%00", "<b>x</b>", "' OR 1=1 --"]),
)
