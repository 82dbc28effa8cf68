"""A request source is two classes and one registry line (ARCHITECTURE.md "How to add a request source").

A source registered only here, with a list-valued option, is found everywhere a user would look, with no
other edit: the CLI's flags, a real run, its fingerprint, the Launch page (its choice and its own fields,
the list typed as text), the traffic preview, the run's title, Compare's traffic line and the HTML export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import ClassVar, Literal

import pytest
from pydantic import Field
from seed_runs import open_page, spec_dict

from engine.backends.base import Request
from engine.run.plan import PlannedRequest, RequestPlan
from engine.run.sources import PlanContext
from engine.spec import SpecError, Workload, parse_job_spec, sources
from engine.spec.sources.base import TrafficSource


class CountdownTraffic(TrafficSource):
    """Test double (registered only in this module): prompts of the given lengths in turn, each asking for one
    token fewer than the one before."""

    source: Literal["countdown"] = "countdown"
    lengths: list[int] = Field(min_length=1, max_length=64, description="prompt lengths, in turn")

    label: ClassVar[str] = "countdown"
    summary: ClassVar[str] = "prompts of the given lengths, in turn"
    planner: ClassVar[str] = f"{__name__}:CountdownPlanner"
    labels: ClassVar[dict[str, str]] = {"lengths": "Countdown prompt lengths (tokens)"}

    def title(self) -> str:
        return f"countdown {'/'.join(map(str, self.lengths))}"


class CountdownPlanner:
    name = "countdown"

    def check(self, traffic: CountdownTraffic, workload: Workload, ctx: PlanContext | None) -> dict[str, int]:
        if any(n < 1 for n in traffic.lengths):
            raise SpecError("countdown: every length must be at least 1")
        return {"requests": workload.requests}

    def plan(self, traffic: CountdownTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        n = workload.warmup + workload.requests
        lengths = [traffic.lengths[i % len(traffic.lengths)] for i in range(n)]
        planned = [
            PlannedRequest(Request(prompt=[7] * k, max_new_tokens=max(1, 4 - i), ignore_eos=True))
            for i, k in enumerate(lengths)
        ]
        return RequestPlan(self.name, planned[: workload.warmup], planned[workload.warmup :], facts={"made": n})


@pytest.fixture
def countdown() -> Iterator[None]:
    sources.register(CountdownTraffic, frozenset(Workload.model_fields))
    yield
    sources.unregister("countdown")


def test_the_spec_reads_it_and_its_fingerprint_names_it(countdown: None) -> None:
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "workload": {"traffic": {"source": "countdown", "lengths": [3]}}}
    )
    other = parse_job_spec(
        {"model": {"source": "demo"}, "workload": {"traffic": {"source": "countdown", "lengths": [4]}}}
    )
    assert spec.workload.traffic.title() == "countdown 3" and spec.fingerprint() != other.fingerprint()
    assert parse_job_spec(spec.canonical_json()).fingerprint() == spec.fingerprint()
    with pytest.raises(SpecError, match="lengths is not an option of the synthetic source"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"lengths": [3]}})


def test_an_unknown_source_is_one_line() -> None:
    with pytest.raises(SpecError, match="unknown request source 'nope'; available: synthetic, prompt_file"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"traffic": {"source": "nope"}}})


@pytest.mark.slow
def test_the_cli_runs_it_and_every_view_names_it(countdown: None, db, db_url, capsys) -> None:
    from engine.cli.main import main
    from engine.report.export import comparison_html
    from engine.report.naming import run_name
    from engine.report.recipes import context_differences
    from storage.runs import get_requests, get_run

    args = ["run", "--db", db_url, "--json", "--model", "synthetic:smollm2-135m", "--source", "countdown"]
    assert main([*args, "--lengths", "6,5,4", "--requests", "3", "--warmup", "1", "--output-tokens", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spec"]["workload"]["traffic"] == {"source": "countdown", "lengths": [6, 5, 4]}
    run = get_run(db, out["run_id"])
    measured = [r for r in get_requests(db, run.id) if not r.warmup]
    assert [r.prompt_tokens for r in measured] == [5, 4, 6]  # the warm-up took the first length
    assert [r.output_tokens for r in measured] == [3, 2, 1]  # each its own length
    assert run.provenance["request_source"] == {"name": "countdown", "made": 4}
    assert run_name(run).endswith("countdown 6/5/4")
    plain = SimpleNamespace(spec=spec_dict(), engine="transformers", device_name="test CPU")
    assert context_differences(run, plain)[0].startswith("traffic countdown 6/5/4 → 4 × 3 req")
    assert "countdown 6/5/4" in comparison_html([run], {run.id: get_requests(db, run.id)}, run.id)


def test_launch_offers_it_with_its_own_fields_and_queues_it(countdown: None, db, db_url, monkeypatch) -> None:
    from storage import jobs

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    app = open_page("views/launch.py")
    app.radio(key="traffic").set_value("countdown").run()
    preset = app.selectbox(key="preset").value
    field = app.text_input(key=f"tr_{preset}_countdown_lengths")
    assert field.label == "Countdown prompt lengths (tokens) (comma-separated)"
    field.input("6, 5, 4").run()
    assert not app.exception and any("countdown 6/5/4" in s.value for s in app.success), [e.value for e in app.error]
    preview = next(e for e in app.expander if e.label.startswith("Preview traffic"))
    assert "countdown 6/5/4" in preview.label
    app.button(key="submit").click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["workload"]["traffic"] == {"source": "countdown", "lengths": [6, 5, 4]}
