"""Several client processes fed by the one load driver, against a fake server on 127.0.0.1."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeServer, fake_server

from engine.backends.base import Request
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.launchers import LocalLauncher
from engine.run.driver import drive_phase
from engine.run.plan import PlannedRequest, planned
from engine.spec import Workload

PROCESSES = 3


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with fake_server(ttft_s=0.01, itl_s=0.002) as s:
        yield s


@pytest.fixture(scope="module")
def pool(server: FakeServer) -> Iterator[object]:
    backend = OpenAIBackend()
    backend.configure(server.base_url, "fake", "completions", None)
    pool = backend.client_pool(PROCESSES, lambda *_: None)
    yield pool
    pool.close()
    backend.unload()


def _fresh(server: FakeServer) -> None:
    with server.seen.lock:
        server.seen.bodies.clear()
        server.seen.arrivals_ns.clear()
        server.seen.authorizations.clear()
        server.seen.peak_in_flight = 0


def test_records_merge_into_one_run_with_exact_counts(pool, server) -> None:
    _fresh(server)
    prompts = [[i + 1, i + 2] for i in range(24)]
    result = drive_phase(pool, planned(prompts, [3 + i % 4 for i in range(24)]), Workload(requests=24, arrival="max"))
    records = result.records
    assert [r.index for r in records] == list(range(24))
    assert all(r.ok for r in records), [r.error for r in records if not r.ok]
    assert [r.output_tokens for r in records] == [3 + i % 4 for i in range(24)]  # each its own length
    assert all(r.cached_prompt_tokens == 2 for r in records)  # the server's prefix-cache hits, from its usage
    assert all(r.send_ns >= r.ready_ns > 0 and r.chunk_ns == sorted(r.chunk_ns) for r in records)
    assert all(r.chunk_ns[0] > r.send_ns for r in records)  # one clock for every process
    assert len(server.seen.bodies) == 24 and sorted(b["prompt"] for b in server.seen.bodies) == sorted(prompts)
    assert set(pool.placements.values()) == set(range(PROCESSES))  # every process sent some
    assert [s.role for s in result.client] == ["driver"] + ["sender"] * PROCESSES
    import gc

    assert gc.isenabled()  # paused for the phase only
    assert all(s.loop_lag_ns and s.wall_ns > 0 for s in result.client)


def test_the_concurrency_limit_holds_across_processes(pool, server) -> None:
    _fresh(server)
    wl = Workload(requests=30, arrival="concurrency", max_concurrency=4)
    result = drive_phase(pool, planned([[1]] * 30, 6), wl)
    assert all(r.ok for r in result.records)
    assert server.seen.peak_in_flight <= 4  # the server never saw more
    assert result.stats["peak_concurrency"] <= 4
    assert len(set(pool.placements[r.index] for r in result.records)) > 1


def _session_plan(sessions: int, turns: int) -> list[PlannedRequest]:
    out = []
    for s in range(sessions):
        for t in range(turns):
            request = Request(prompt=[s, t], max_new_tokens=2, messages=({"role": "user", "content": f"s{s} t{t}"},))
            out.append(PlannedRequest(request, session=s, turn=t))
    return out


def test_a_sessions_turns_stay_in_one_process_with_the_real_replies(pool, server) -> None:
    _fresh(server)
    wl = Workload(requests=15, arrival="max")

    def chat_ids(messages):  # type: ignore[no-untyped-def]
        return [len(m["content"]) for m in messages]

    result = drive_phase(pool, _session_plan(5, 3), wl, chat_ids=chat_ids)
    assert all(r.ok for r in result.records)
    by_session: dict[int, set[int]] = {}
    for r in result.records:
        by_session.setdefault(r.session, set()).add(pool.placements[r.index])
    assert all(len(procs) == 1 for procs in by_session.values())  # each session in one process
    assert len({next(iter(p)) for p in by_session.values()}) > 1  # and the sessions spread
    assert all(r.text is None for r in result.records)  # nobody asked for the text back here


def test_a_traces_due_times_are_honoured(pool, server) -> None:
    _fresh(server)
    due = [0.05 * i for i in range(10)]
    plan = [PlannedRequest(Request(prompt=[1], max_new_tokens=2), due_s=d) for d in due]
    result = drive_phase(pool, plan, Workload(requests=10, arrival="poisson", rate=5.0))
    assert result.stats["arrival"] == "trace"
    start = result.start_ns
    for rec, d in zip(result.records, due, strict=True):
        assert rec.arrival_ns == start + int(d * 1e9)
        assert rec.send_ns >= rec.arrival_ns  # never early
        assert rec.send_ns - rec.arrival_ns < 50_000_000  # and on time (a loaded 2-core CI machine: 50 ms)
    arrivals = sorted(server.seen.arrivals_ns)
    assert all(b - a > 30_000_000 for a, b in zip(arrivals, arrivals[1:], strict=False))  # 50 ms apart at the server


def test_static_batches_are_split_and_a_cancellation_keeps_what_arrived(pool, server) -> None:
    _fresh(server)
    result = drive_phase(pool, planned([[i] for i in range(6)], 3), Workload(requests=6, batch_size=6))
    assert all(r.ok for r in result.records) and len({pool.placements.get(r.index) for r in result.records}) >= 1
    plan = [PlannedRequest(Request(prompt=[1], max_new_tokens=1000), cancel_after_s=0.3)]  # a 2 s stream
    [rec] = drive_phase(pool, plan, Workload(requests=1, arrival="max")).records
    assert rec.cancelled and rec.error is None
    assert 0 < len(rec.chunk_ns) < 1000  # the chunks that had arrived came back from the client process


def test_one_failed_request_is_its_own_reason(pool, server) -> None:
    bad = OpenAIBackend()
    bad.configure("http://127.0.0.1:9/v1", "fake", "completions", None)
    senders = bad.client_pool(2, lambda *_: None)
    try:
        result = drive_phase(senders, planned([[1], [2]], 2), Workload(requests=2, arrival="max"))
    finally:
        senders.close()
        bad.unload()
    assert all(r.error and r.error.startswith("cannot connect to http://127.0.0.1:9/v1") for r in result.records)


def test_engines_that_serve_in_process_refuse_several_client_processes() -> None:
    from engine.spec import SpecError, parse_job_spec

    with pytest.raises(SpecError, match="transformers engine serves its requests inside the job's process"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"client_processes": 2}})
    spec = {"model": {"source": "demo"}, "recipe": {"engine": "openai", "model_name": "m"}}
    one = parse_job_spec(spec)
    four = parse_job_spec({**spec, "workload": {"client_processes": 4}})
    assert one.fingerprint() == four.fingerprint()  # how many processes send is not what is measured


def test_load_nodes_need_an_endpoint_other_nodes_reach_and_a_ray_cluster(monkeypatch) -> None:
    from engine.run.preflight import preflight
    from engine.settings import get_settings
    from engine.spec import SpecError, parse_job_spec

    with pytest.raises(SpecError, match="vllm-server engine's server listens on the job's own loopback"):
        parse_job_spec(
            {"model": {"source": "demo"}, "recipe": {"engine": "vllm-server"}, "workload": {"load_nodes": 2}}
        )
    spec = {"model": {"source": "demo"}, "recipe": {"engine": "openai", "model_name": "m"}}
    spread = parse_job_spec({**spec, "workload": {"load_nodes": 2}})
    assert spread.fingerprint() == parse_job_spec(spec).fingerprint()  # where the client runs is not what is measured
    for name in ("LATENCYLAB_RAY_ADDRESS", "LATENCYLAB_JOB_RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    with pytest.raises(SpecError, match="load_nodes 2: no Ray cluster to spread the load over"):
        preflight(spread)
    preflight(spread, runtime=False)  # queued for a Ray executor elsewhere: checked where it runs
    monkeypatch.setenv("LATENCYLAB_JOB_RAY_ADDRESS", "127.0.0.2:6379")  # the Ray task that runs the job says where
    preflight(spread)
    get_settings.cache_clear()


def test_the_default_number_comes_from_the_cores_and_the_concurrency() -> None:
    from engine.run.sending import choose
    from engine.spec import parse_job_spec

    def spec(**workload):  # type: ignore[no-untyped-def]
        return parse_job_spec(
            {"model": {"source": "demo"}, "recipe": {"engine": "openai", "model_name": "m"}, "workload": workload}
        )

    assert choose(spec(requests=1), cores=16) == 1
    assert choose(spec(arrival="concurrency", max_concurrency=1024, requests=4096), cores=16) == 4
    assert choose(spec(arrival="concurrency", max_concurrency=100_000, requests=4096), cores=16) == 8
    assert choose(spec(arrival="concurrency", max_concurrency=1024, requests=4096), cores=2) == 1
    assert choose(spec(client_processes=3), cores=2) == 3
    assert choose(parse_job_spec({"model": {"source": "demo"}, "workload": {"batch_size": 512}}), cores=16) == 1


def test_a_run_with_client_processes_is_stored_like_one_process(server, db) -> None:
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec

    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "openai", "base_url": server.base_url, "model_name": "fake"},
            "workload": {"prompt_tokens": 4, "output_tokens": 3, "requests": 12, "warmup_requests": 2,
                         "arrival": "concurrency", "max_concurrency": 4, "client_processes": 2},
        }
    )  # fmt: skip
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    m = result.metrics
    assert m["completed"] == 12 and m["warmup_excluded"] == 2 and m["total_output_tokens"] == 36
    assert m["client"]["processes"] == 2 and m["client"]["loop_lag_samples"] > 0
    assert result.provenance["client_processes"]["processes"] == 2
    assert sum(result.provenance["client_processes"]["requests"]) == 14  # warm-up and measured
    from storage.runs import get_requests

    stored = get_requests(db, result.run_id)
    assert len(stored) == 14 and all(len(r.chunk_ns) == 3 for r in stored if not r.error)


class _RemoteHere(LocalLauncher):
    """Processes on this host, treated as on another node (--load-nodes without a cluster): settings
    carry the key and the tokenizer's files, and each clock offset is estimated."""

    remote = True


def test_remote_processes_get_the_key_and_tokenizer_files_and_a_measured_clock_offset(
    server, demo_folder, monkeypatch
) -> None:
    from engine.backends.openai.process_pool import ClientProcesses
    from engine.backends.openai.tokenizer import local_tokenizer

    monkeypatch.setenv("LL_TEST_KEY", "sk-remote-test")
    backend = OpenAIBackend()
    backend.configure(server.base_url, "fake", "completions", "sk-remote-test")
    backend._api_key_env = "LL_TEST_KEY"
    backend._tokenizer = local_tokenizer(str(demo_folder))
    backend._tokenizer_source = {"kind": "files", "path": str(demo_folder), "revision": None}
    settings = backend.remote_client_settings()
    assert settings["api_key"] == "sk-remote-test" and "api_key" not in backend.client_settings()
    assert settings["tokenizer"]["kind"] == "inline" and "tokenizer.json" in settings["tokenizer"]["files"]
    from engine.backends.openai.client_process import client_from_settings

    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("latencylab-tokenizer-*"))
    remote_client = client_from_settings(settings)
    assert remote_client.tokenizer().encode("hello") == backend.tokenizer().encode("hello")
    assert set(temp.glob("latencylab-tokenizer-*")) == before  # the files were read, then their folder removed
    remote_client.unload()
    monkeypatch.delenv("LL_TEST_KEY")  # a remote node has not the job's environment: the key travels itself
    pool = ClientProcesses(backend, 2, _RemoteHere()).start(lambda *_: None)
    try:
        _fresh(server)
        result = drive_phase(pool, planned([[1, 2]] * 6, [3] * 6), Workload(requests=6, arrival="max"))
        assert all(r.ok and r.chunk_ns[0] > r.send_ns for r in result.records), [r.error for r in result.records]
        info = pool.info()
    finally:
        pool.close()
        backend.unload()
    assert server.seen.authorizations == ["Bearer sk-remote-test"] * 6
    (node,) = info["nodes"]  # both on this host, whose node facts are unknown ("?")
    assert node["processes"] == 2 and node["requests"] == 6
    # one host, one CLOCK_MONOTONIC: each offset is within its round trip
    assert all(abs(off) <= 1000 * rtt for off, rtt in zip(node["clock_offsets_ns"], node["rtt_us"], strict=True))


def test_a_remote_processs_stamps_move_onto_the_drivers_clock() -> None:
    from engine.backends.openai import channel
    from engine.measure.records import RequestRecord

    rec = RequestRecord(index=0, arrival_ns=100, send_ns=0, prompt_tokens=2)
    channel.fill_record(rec, [5_000, [6_000, 6_500], [1, 1], 2, None, None, None], clock_offset_ns=4_000)
    assert (rec.send_ns, rec.chunk_ns) == (1_000, [2_000, 2_500])  # durations unchanged: TTFT 1,000 ns, ITL 500
