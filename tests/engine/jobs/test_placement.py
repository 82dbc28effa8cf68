"""Where a job ran, without a cluster: the job process's environment, provenance's placement, the
words and links the pages show, and what a job asks of Ray (engine/jobs/ray_cluster.py)."""

from __future__ import annotations

from engine.jobs import placement
from engine.jobs.launch import job_env
from engine.jobs.ray_cluster import cluster_devices, cluster_summary, runtime_env, task_options
from engine.measure import provenance

NODE = "efb0f1b4bc20819c9aa95209a0a83ce326ce8476a04e738740a3a2d3"


def test_the_job_env_carries_where_it_runs_and_provenance_records_it(monkeypatch):
    monkeypatch.setenv("LATENCYLAB_JOB_NODE_ID", "stale: where this process ran")
    env = job_env("cuda:1,2", {"executor": "ray", "node_id": NODE, "task_id": "t1"}, gpus=["5"])
    assert env["CUDA_VISIBLE_DEVICES"] == "5" and env["LATENCYLAB_PINNED"] == "1"
    assert env["LATENCYLAB_JOB_EXECUTOR"] == "ray" and env["LATENCYLAB_JOB_NODE_ID"] == NODE
    assert job_env("cuda:1,2", {"executor": "local"})["CUDA_VISIBLE_DEVICES"] == "1,2"
    for key in [k for k in env if k.startswith("LATENCYLAB_JOB_")]:
        monkeypatch.setenv(key, env[key])
    where = provenance.placement()
    assert where["executor"] == "ray" and where["node_id"] == NODE and where["task_id"] == "t1" and where["host"]


def test_a_run_started_by_hand_is_inline(monkeypatch):
    for key in [k for k in __import__("os").environ if k.startswith("LATENCYLAB_JOB_")]:
        monkeypatch.delenv(key)
    assert provenance.placement()["executor"] == "inline"


def test_the_pages_words_and_dashboard_link():
    tail = (
        f"old\n--- attempt 2 on ray node {NODE} (10.0.0.7), task abcdef0123456789abcdef, 2026-12-01 23:41:21\njob 1\n"
    )
    where = placement.from_log_tail(tail)
    assert where == {"executor": "ray", "node_id": NODE, "node_ip": "10.0.0.7", "task_id": "abcdef0123456789abcdef"}
    assert placement.in_words(where) == "ray node efb0f1b4bc20… (10.0.0.7) · task abcdef012345…"
    assert placement.dashboard_link(where, "http://head:8265/") == f"http://head:8265/#/cluster/nodes/{NODE}"
    assert placement.dashboard_link(where, None) is None
    assert placement.from_log_tail("--- attempt 1 on vm:1:ab, device cpu, 2026") is None
    assert placement.in_words({"executor": "local", "host": "gpu-3"}) == "local worker on gpu-3"


def test_what_the_cluster_offers_and_what_a_job_asks():
    nodes = [
        {"Resources": {"CPU": 32.0, "GPU": 8.0, "accelerator_type:H100": 1.0}},
        {"Resources": {"CPU": 16.0, "GPU": 4.0, "accelerator_type:A100": 1.0}},
    ]
    assert cluster_summary(nodes) == "ray: 2 nodes — 8 × H100, 4 × A100"
    assert cluster_summary([{"Resources": {"CPU": 2.0}}]) == "ray: 1 node — 2 CPUs"
    assert cluster_devices(nodes) == ["cpu"] + [f"cuda:{i}" for i in range(8)]
    cpu = task_options("cpu", 1.0, {"latencylab_test_node": 1})
    assert cpu == {"num_cpus": 1.0, "num_gpus": 0, "resources": {"latencylab_test_node": 1}, "max_retries": 0}
    assert task_options("cuda:3", 2.0, {})["num_gpus"] == 1


def test_the_runtime_env_ships_the_code_and_settings_not_the_executors_own(monkeypatch):
    monkeypatch.setenv("LATENCYLAB_CACHE_PATH", "/models")
    monkeypatch.setenv("LATENCYLAB_RAY_ADDRESS", "head:6379")
    env = runtime_env()
    assert env["env_vars"]["LATENCYLAB_CACHE_PATH"] == "/models" and "LATENCYLAB_RAY_ADDRESS" not in env["env_vars"]
    assert env["working_dir"] and "/data" in env["excludes"] and "data" not in env["excludes"]
