"""The fuzz suite's settings and tally.

Profiles (``HYPOTHESIS_PROFILE``): ``ci`` (the default; the whole suite in about two minutes
on two cores), ``long`` (many more examples, for a local run:
``HYPOTHESIS_PROFILE=long pytest tests/fuzz``). Every suite records what it tried and how
each case ended; the tally is printed at the end of the session.
"""

from __future__ import annotations

from fuzz_support import PROFILE, TALLY
from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # no timed assertions: a slow machine is not a failure
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    "database": None,  # no .hypothesis folder in the repository
}
settings.register_profile("ci", max_examples=150, **_COMMON)
settings.register_profile("long", max_examples=3000, **_COMMON)
settings.load_profile(PROFILE)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not TALLY:
        return
    terminalreporter.section("fuzz tally (tried / how each ended)")
    for suite, counts in sorted(TALLY.items()):
        rest = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "tried")
        terminalreporter.write_line(f"{suite:<10} tried {counts['tried']:>6}: {rest}")
