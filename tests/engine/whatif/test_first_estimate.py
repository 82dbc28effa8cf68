"""The first estimate has a time (issue 26, item 5): ``make run`` (``python -m engine prepare``) measures the
machine once, where the Launch page said "time unknown" until the user found What-if's calibration button."""

from __future__ import annotations

from engine.cli.main import main
from engine.spec import parse_job_spec
from engine.whatif.job import estimate_job

DEMO = {"model": {"source": "demo"}, "workload": {"prompt_tokens": 64, "output_tokens": 16, "requests": 4}}


def test_prepare_measures_the_cpu_once_so_the_first_estimate_has_a_time(db_url, capsys):
    from storage import open_database
    from storage.hardware import list_measurements

    db = open_database(db_url)
    before = estimate_job(parse_job_spec(DEMO), db)
    assert before.seconds is None and "not measured" in " ".join(before.unknown)
    assert main(["prepare", "--db", db_url]) == 0
    assert "measured this machine's cpu once" in capsys.readouterr().err
    assert len(list_measurements(db, device="cpu")) == 1
    after = estimate_job(parse_job_spec(DEMO), db)
    assert after.seconds is not None and after.seconds > 0
    assert main(["prepare", "--db", db_url]) == 0  # once: a second start measures nothing
    assert len(list_measurements(db, device="cpu")) == 1
