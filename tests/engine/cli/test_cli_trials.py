"""``--preset``, ``--trials`` and ``--until-ci`` on run/submit: the spec they build, and bad input."""

from __future__ import annotations

import pytest

from engine.cli.common import spec_from_args
from engine.cli.main import build_parser, main


def spec_of(*argv: str, verb: str = "run"):
    return spec_from_args(build_parser().parse_args([verb, "--model", "demo", *argv]))


def test_decision_preset_and_overrides():
    wl = spec_of("--preset", "decision").workload
    assert (wl.trials, wl.until_ci_pct, wl.until_metric, wl.max_requests) == (3, 2.0, "tpot_ms_p50", 1000)
    wl = spec_of("--preset", "decision", "--until-ci", "5", "--max-requests", "200", verb="submit").workload
    assert (wl.until_ci_pct, wl.max_requests, wl.trials) == (5.0, 200, 3)
    assert spec_of("--preset", "quick").workload.trials == 1


def test_trials_and_adaptive_flags():
    wl = spec_of("--trials", "4").workload
    assert wl.trials == 4 and wl.until_ci_pct is None
    wl = spec_of("--until-ci", "3", "--until-metric", "ttft_ms_p90", "--max-seconds", "60").workload
    assert (wl.until_ci_pct, wl.until_metric, wl.max_seconds, wl.request_cap) == (3.0, "ttft_ms_p90", 60.0, None)
    for older in ("ttft_ms.p90", "ttft_p90"):  # the spellings users typed before read the same
        assert spec_of("--until-ci", "3", "--until-metric", older).workload.until_metric == "ttft_ms_p90"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--max-requests", "50"], "max_requests is only used with until_ci_pct"),
        (["--until-ci", "2", "--until-metric", "tokens"], "until_metric"),
        (["--trials", "0"], "is out of range (1.."),
        (["--preset", "slow"], "invalid choice"),
    ],
)
def test_bad_trial_flags_are_one_line(argv, words, capsys, db_url):
    code = main(["run", "--db", db_url, "--model", "demo", *argv])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
