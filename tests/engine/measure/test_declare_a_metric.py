"""A new scalar metric is one declaration: declared only inside this test, it is computed for new runs
and appears in the result object, the ``show`` table, Compare (table, ratios, CSV), Explore's axes (listing and the page)
and the runs CSV export; removed afterwards, it appears nowhere (ARCHITECTURE.md, "How to add a metric")."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from seed_runs import make_run, open_page

from engine.measure import registry
from engine.measure.declarations import SHOWN
from engine.measure.metric import Metric
from engine.measure.stamps import Phase
from engine.report.compare import compare_runs, comparison_frame
from engine.report.export import comparison_csv, table_csv
from engine.report.listing import axis_choices
from engine.report.results import render_table, result_object
from storage.frames import runs_frame
from storage.runs import get_run

KEY = "test_prompt_tokens_per_s"


def _prompt_tokens_per_s(phase: Phase) -> float:
    """Prompt tokens of the successful measured requests per second of the phase (from its records)."""
    return sum(r.prompt_tokens for r in phase.ok) / phase.duration_s


FAKE = Metric(
    KEY,
    "prompt tokens/s (declared by a test)",
    "tok/s",
    "higher",
    "throughput",
    "prompt tok/s",
    order=1015,  # after requests/s
    shown=SHOWN,  # the default places; no SQL column (that needs an Alembic revision)
    compute=_prompt_tokens_per_s,
)


@pytest.fixture
def fake_metric() -> Iterator[Metric]:
    """The declaration, for this test only; every consumer asks the registry, so nothing is rebuilt."""
    with registry.declared(FAKE) as metric:
        yield metric
    assert KEY not in registry.REGISTRY


@pytest.fixture
def two_runs(db, fake_metric) -> list[int]:
    """Two stored runs measured while the metric is declared (their metrics JSON holds it)."""
    return [make_run(db, name="base", tpot_ms=20), make_run(db, name="faster", dtype="bfloat16", tpot_ms=8, seed=1)]


def test_a_declared_metric_is_computed_and_compared(db, two_runs):
    base, new = (get_run(db, i) for i in two_runs)
    assert base.metrics[KEY] == pytest.approx(6 * 32 / base.metrics["duration_s"])  # 6 requests of 32 tokens
    assert result_object(base)[KEY] == base.metrics[KEY]
    table = render_table(result_object(base)).splitlines()  # `python -m engine show`: its line, after requests/s
    rows = [line.split("  ")[0] for line in table]
    assert rows.index("requests/s") < rows.index(FAKE.label) < rows.index("tokens/s per user (1/TPOT)")
    comparison = compare_runs([base, new], base.id)
    keys = comparison.metric_keys()
    assert keys.index("requests_per_s") < keys.index(KEY) < keys.index("tokens_per_s_per_user")
    assert comparison.ratios[new.id][KEY] == pytest.approx(new.metrics[KEY] / base.metrics[KEY])
    frame = comparison_frame(comparison, formatted=True)
    assert FAKE.label in frame["metric"].tolist()
    assert FAKE.label in comparison_csv([base, new], base.id)


def test_a_declared_metric_is_an_explore_axis_and_in_the_runs_csv(db, two_runs):
    frame = runs_frame(db)
    assert frame[KEY].notna().all()  # read from the runs' metrics JSON: it has no column of its own
    perf, _ = axis_choices(frame)
    assert KEY in perf
    assert KEY in table_csv(frame).splitlines()[0].split(",")


def test_a_declared_metric_is_on_the_explore_page(db, db_url, monkeypatch, two_runs):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/explore.py", x=KEY, y="output_tokens_per_s")
    assert not at.exception, at.exception
    assert FAKE.label in at.selectbox(key="explore_x").options  # its label, in display order
    assert at.selectbox(key="explore_x").value == KEY
    layout = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert layout["xaxis"]["title"]["text"].startswith(FAKE.header)


def test_without_the_declaration_it_is_gone(db):
    make_run(db)
    assert KEY not in runs_frame(db).columns
    assert KEY not in compare_runs([get_run(db, 1)]).metric_keys()
    with pytest.raises(ValueError, match="unknown places"):
        registry.declare(Metric("x", "x", "", "higher", "throughput", shown=frozenset({"nowhere"})))
    with pytest.raises(ValueError, match="declared already"):
        registry.declare(registry.lookup("tpot_ms_p50"))
