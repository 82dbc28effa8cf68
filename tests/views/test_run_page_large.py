"""The Run page of a seeded 100,000-request run (issue 24): it renders from the run's aggregates, every
figure small and saying when it shows a sample or bins. Its server time is benchmarks/large_run.py's."""

from __future__ import annotations

import json

import pytest
from large_run_seed import store_large_run
from seed_runs import open_page

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def large(tmp_path_factory, session_dir):
    from storage import open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('large') / 'large.db'}"
    return url, store_large_run(open_database(url), n=100_000, concurrency=1024)


def test_a_100k_request_run_page_renders_from_aggregates(large, monkeypatch):
    url, run_id = large
    monkeypatch.setenv("LATENCYLAB_DB_URL", url)
    at = open_page("views/run.py", run=str(run_id))
    assert not at.exception
    charts = {
        json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec) for c in at.get("plotly_chart")
    }
    assert len(charts) == 9  # the same sections as any run: CDF + histogram x3, timeline, over time, tokens
    assert "Per-request timeline: 300 of 100,002 requests (every 333th)" in charts
    assert "ITL (AIPerf: ICL) CDF (drawn through 2,000 of 3,096,900 order statistics)" in charts
    over = [a["text"] for a in charts["Over the run"]["layout"]["annotations"]]
    assert "the most in each" in over[1] and "(5,000 of 99,900, evenly spread)" in over[2]
    assert "5,000 of 3,096,900 sampled; median per" in over[3]
    points = sum(len(t.get("x") or t.get("y") or []) for c in charts.values() for t in c["data"])
    assert points < 60_000  # drawn from aggregates: not 3 million stamps
    assert [m.label for m in at.metric][:2] == ["TTFT p50", "TPOT p50"]
    assert any(s.value == "Diagnostics" for s in at.subheader)
