"""The Run page names what made a client late (issue 34, item 5): a managed server on the same cores, not the
client's own CPU, with advice that fits (separate cores), for runs flagged before causes were recorded too."""

from __future__ import annotations

from seed_runs import make_run, open_page

from engine.run import noise

CLIENT = {
    "processes": 1, "send_lag_ms_p50": 3.1, "send_lag_ms_p99": 58.5, "send_lag_ms_max": 71.0, "loop_lag_ms_p50": 0.4,
    "loop_lag_ms_p99": 2.0, "loop_lag_ms_max": 4.0, "cpu_share": 0.009, "cpu_share_max": 0.009, "cores": 1,
    "machine_cores": 2,
}  # fmt: skip
MACHINE = {"cpu_count": 2, "job_cpu_pct": 186.0, "others_cpu_pct": 3.0, "load_during_max": 2.2}


def test_a_client_starved_by_its_managed_server_is_told_to_separate_cores(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    old_flag = {"flag": "client_bound", "kind": "machine", "detail": "the client set the pace: requests went out"}
    new_flags = noise.noise_flags(MACHINE, {"client": CLIENT}, engine="vllm-server")
    for flags in ([old_flag], new_flags):  # flagged before causes were recorded, and now
        run = make_run(db, extra_metrics={"noise_flags": flags, "client": CLIENT}, provenance={"noise": MACHINE})
        at = open_page("views/run.py", run=str(run))
        assert not at.exception
        bodies = " ".join(m.value for m in at.markdown)
        assert "Cause: a server on the same cores took them" in bodies
        assert "taskset" in bodies and "more --client-processes would not help" in bodies
