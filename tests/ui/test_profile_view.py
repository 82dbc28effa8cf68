"""The Run page's profile section (AppTest over a seeded run): the table and the trace download."""

from __future__ import annotations

import gzip
import json

from seed_runs import open_page
from series_seed import seed_run

from engine.settings import get_settings
from ui.profile_view import top_table, trace_file

TOP = [
    {"name": "aten::mm", "self_ms": 600.0, "calls": 2110, "share_pct": 73.3},
    {"name": "(outside operators)", "self_ms": 100.0, "calls": 0, "share_pct": 11.5},
]


def _record(trace: str | None) -> dict:
    return {
        "steps": 10,
        "batch_size": 1,
        "activities": ["cpu"],
        "device": "cpu",
        "top": TOP,
        "trace_file": trace,
        "step_ms_profiled": 91.0,
        "available": True,
    }


def test_top_table_per_step() -> None:
    table = top_table(_record(None))
    assert table["operator"].tolist() == ["aten::mm", "(outside operators)"]
    assert table["per step [ms]"].tolist() == [60.0, 10.0] and table["share [%]"].tolist() == [73.3, 11.5]


def test_only_traces_in_the_data_folder_are_served(tmp_path) -> None:
    inside = tmp_path / "profiles" / "f-1.json.gz"
    inside.parent.mkdir()
    inside.write_bytes(gzip.compress(b"{}"))
    outside = tmp_path / "secret.json.gz"
    outside.write_bytes(b"x")
    assert trace_file({"trace_file": str(inside)}, tmp_path) == inside.resolve()
    assert trace_file({"trace_file": str(outside)}, tmp_path) is None
    assert trace_file({"trace_file": str(tmp_path / "profiles" / ".." / "secret.json.gz")}, tmp_path) is None
    assert trace_file({"trace_file": None}, tmp_path) is None


def test_run_page_shows_the_profile_and_offers_the_trace(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    trace = get_settings().data_dir / "profiles" / "abc-20261201T000000000.json.gz"
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": []}).encode()))
    run_id = seed_run(db, {"profile": _record(str(trace))})
    at = open_page("views/run.py", run=str(run_id))
    assert not at.exception
    assert "Profile" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe if "operator" in d.value.columns)
    assert table["operator"].tolist()[0] == "aten::mm"
    (button,) = at.get("download_button")
    assert "Download the trace" in button.proto.label

    missing = seed_run(db, {"profile": _record("/elsewhere/abc.json.gz")})
    at = open_page("views/run.py", run=str(missing))
    assert not at.get("download_button")
    assert any("is not in this machine's data folder" in c.value for c in at.caption)


def test_an_engine_without_profiling_says_so(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    note = {"steps": 5, "available": False, "note": "profiling not available for openai", "activities": [], "top": []}
    at = open_page("views/run.py", run=str(seed_run(db, {"profile": note})))
    assert "profiling not available for openai." in [i.value for i in at.info]


def test_the_launch_form_offers_profile_steps(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/launch.py")
    (field,) = [
        n for n in at.number_input if n.label == "Profile decode steps (0: off)"
    ]  # generated from the Workload field
    assert field.value == 0 and "torch.profiler" in (field.proto.help or "")
