"""The Ray executor on a real local Ray cluster (a head and a second node process with a custom
resource of its own) and a real PostgreSQL: placement by resource, 20 jobs exactly once over two
nodes, cancel mid-run, a node killed mid-job, and the same run as the local worker's.

Only the processes this module starts are stopped, by their process groups. The jobs are the real
demo model (placement and fingerprint) and the real ``openai`` engine against the tests' fake
OpenAI server, whose jobs start in a second (20 jobs, cancel, node death).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from engine.spec import parse_job_spec
from storage import jobs, open_database, runs
from tests.engine.jobs.test_worker import job_pids

ray = pytest.importorskip("ray")
from fake_openai import FakeServer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.alone]
REPO = Path(__file__).resolve().parents[3]
RAY = str(Path(sys.executable).with_name("ray"))
NODE_RESOURCE = "latencylab_test_node"
# Ray's GCS declares a silent node dead after about 1.5 s instead of 15 (the node-death test).
CLUSTER_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}

_storage = importlib.util.spec_from_file_location("storage_conftest", REPO / "tests" / "storage" / "conftest.py")
_conftest = importlib.util.module_from_spec(_storage)
_storage.loader.exec_module(_conftest)
pg_url = _conftest.pg_url  # the storage tests' throwaway PostgreSQL server, module-scoped


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Loopback addresses for the nodes, one each: Ray replaces 127.0.0.1 (and "localhost") with the machine's own
# interface address (ray._private.services.resolve_ip_for_localhost), so its nodes would talk over that
# interface; any other address of 127.0.0.0/8 it keeps, and every connection stays on loopback.
HEAD_IP, NODE_IP = "127.0.0.2", "127.0.0.3"


def _ray_node(args: list[str], log: Path, ip: str) -> subprocess.Popen:
    """``ray start --block`` in a session of its own: its group holds the node's processes."""
    base = ["--block", f"--node-ip-address={ip}", "--object-store-memory=80000000", "--disable-usage-stats"]
    return subprocess.Popen(
        ["nice", "-n", "10", RAY, "start", *base, *args],
        env={**os.environ, **CLUSTER_ENV},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def wait_for(predicate, timeout: float = 90.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout} s")


class Cluster:
    """The module's Ray cluster: its address, node processes and the second node's id."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, _free_port()
        self.address = f"{HEAD_IP}:{self.port}"
        self.head = _ray_node(
            ["--head", f"--port={self.port}", "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={root}"],
            root / "head.log",
            HEAD_IP,
        )
        wait_for(lambda: b"Ray runtime started" in (root / "head.log").read_bytes(), 90)
        self.node = _ray_node(
            [f"--address={self.address}", "--num-cpus=1", f"--resources={json.dumps({NODE_RESOURCE: 1})}"],
            root / "node.log",
            NODE_IP,
        )
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        ray.init(address=self.address, log_to_driver=False, configure_logging=False)
        nodes = wait_for(lambda: [n for n in ray.nodes() if n["Alive"]] if len(self._alive()) == 2 else None, 90)
        self.node_id = next(n["NodeID"] for n in nodes if NODE_RESOURCE in n["Resources"])
        self.head_id = next(n["NodeID"] for n in nodes if NODE_RESOURCE not in n["Resources"])

    @staticmethod
    def _alive() -> list[dict]:
        return [n for n in ray.nodes() if n["Alive"]]

    def close(self) -> None:
        ray.shutdown()
        for proc in (self.node, self.head):
            _stop_group(proc)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(Path(tempfile.mkdtemp(prefix="llray-", dir="/tmp")))  # Ray's socket paths must be short
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def fake():
    server = FakeServer()
    import threading

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def start_executor(db_url: str, cluster: Cluster, tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, LATENCYLAB_DATA_DIR=str(tmp_path), PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0")
    log = open(tmp_path / f"executor-{time.monotonic_ns()}.log", "wb")
    command = ["worker", "--executor", "ray", "--ray-address", cluster.address, "--db", db_url, "--grace", "2"]
    return subprocess.Popen(
        ["nice", "-n", "10", sys.executable, "-m", "engine", *command, *extra],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _stop_group(proc, 0)


def openai_spec(fake: FakeServer, name: str, output_tokens: int = 4, requests: int = 1):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "openai", "base_url": fake.base_url, "model_name": "fake"},
            "workload": {
                "prompt_tokens": 8,
                "output_tokens": output_tokens,
                "requests": requests,
                "warmup_requests": 0,
            },
            "name": name,
        }
    )


DEMO = {"prompt_tokens": 8, "output_tokens": 4, "requests": 1, "warmup_requests": 0}


def test_a_demo_job_runs_on_the_node_with_its_resource_and_stores_the_local_workers_run(
    cluster, pg_url, tmp_path, demo_folder
):
    from engine.jobs.worker import Worker

    db = open_database(pg_url)
    spec = parse_job_spec({"model": {"source": "demo"}, "workload": DEMO, "name": "placed"})
    on_ray = jobs.submit(db, spec, timeout_s=300)
    proc = start_executor(pg_url, cluster, tmp_path, "--once", "--ray-resources", json.dumps({NODE_RESOURCE: 1}))
    assert proc.wait(timeout=150) == 0, _executor_log(tmp_path)
    job = jobs.get_job(db, on_ray)
    assert job.status == "done", (job.error, job.log_tail)
    assert "on ray node " + cluster.node_id in job.log_tail and "done: run" in job.log_tail
    ray_run = runs.get_run(db, job.run_id)
    placement = ray_run.provenance["placement"]
    assert placement["executor"] == "ray" and placement["node_id"] == cluster.node_id
    assert placement["task_id"] and placement["node_ip"] and placement["worker_id"].startswith("ray:")

    local = jobs.submit(db, spec, timeout_s=300)  # the same spec through the local worker
    Worker(pg_url, ["cpu"], once=True, log_dir=tmp_path / "logs").run()
    local_run = runs.get_run(db, jobs.get_job(db, local).run_id)
    assert local_run.status == ray_run.status == "done"
    assert local_run.fingerprint == ray_run.fingerprint
    assert local_run.provenance["placement"]["executor"] == "local"
    assert ray_run.provenance["git_commit"] == local_run.provenance["git_commit"]  # the code Ray shipped


def test_twenty_jobs_over_two_nodes_each_exactly_once(cluster, pg_url, fake, tmp_path):
    db = open_database(pg_url)
    ids = [jobs.submit(db, openai_spec(fake, f"many {i}"), timeout_s=120) for i in range(20)]
    proc = start_executor(pg_url, cluster, tmp_path, "--once")
    assert proc.wait(timeout=150) == 0, _executor_log(tmp_path)
    done = [jobs.get_job(db, i) for i in ids]
    assert [j.status for j in done] == ["done"] * 20, [(j.id, j.status, j.error) for j in done if j.status != "done"]
    assert all(j.attempts == 1 for j in done)
    stored = [runs.get_run(db, j.run_id) for j in done]
    assert len({r.id for r in stored}) == 20 and all(r.job_id in ids for r in stored)
    nodes = {r.provenance["placement"]["node_id"] for r in stored}
    assert nodes == {cluster.node_id, cluster.head_id}
    assert len(fake.seen.bodies) >= 20


def test_cancel_mid_run_and_a_timeout_end_their_tasks(cluster, pg_url, fake, tmp_path):
    db = open_database(pg_url)
    fake.itl_s = 0.1  # 400 tokens: 40 s of streaming unless stopped
    try:
        cancelled = jobs.submit(db, openai_spec(fake, "cancel me", output_tokens=400), timeout_s=300)
        timed_out = jobs.submit(db, openai_spec(fake, "too slow", output_tokens=400), timeout_s=8)
        proc = start_executor(pg_url, cluster, tmp_path)  # one job on each node
        try:
            wait_for(lambda: jobs.get_job(db, cancelled).measuring_started, 60)
            jobs.cancel(db, cancelled, by="test")
            ended = [
                wait_for(lambda i=i: (j := jobs.get_job(db, i)).status != "running" and j, 45)
                for i in (cancelled, timed_out)
            ]
        finally:
            stop(proc)
    finally:
        fake.itl_s = 0.0
    assert (ended[0].status, ended[0].error) == ("cancelled", "cancelled by user")
    assert (ended[1].status, ended[1].error) == ("failed", "timed out after 8 s")
    assert runs.get_run(db, ended[1].run_id).error == "timed out after 8 s"
    wait_for(lambda: not job_pids(cancelled) and not job_pids(timed_out), 10)


def test_the_clusters_devices_for_launch_and_knobs(cluster, db_url, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from engine.jobs.cluster_devices import cluster_devices
    from engine.settings import get_settings

    info = cluster_devices(cluster.address, fresh=True)
    assert info.problem is None, info.problem
    assert info.summary == "ray: 2 nodes — 2 CPUs" and info.devices == ["cpu"]
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "engine", "knobs", "--ray-address", cluster.address, *a],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    ok = run("--device", "cpu")
    assert ok.returncode == 0 and "on ray: 2 nodes — 2 CPUs" in ok.stdout.splitlines()[0], ok.stderr
    no_gpu = run("--device", "cuda:0")
    assert no_gpu.returncode == 2 and "offers cpu, not cuda:0" in no_gpu.stderr

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    monkeypatch.setenv("LATENCYLAB_RAY_ADDRESS", cluster.address)
    get_settings.cache_clear()
    try:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
        at.run()
        at.switch_page("views/launch.py")
        at.run()
        assert not at.exception
        device = at.selectbox(key="device")
        assert device.options[0].endswith("ray: 2 nodes — 2 CPUs"), device.options
    finally:
        monkeypatch.delenv("LATENCYLAB_RAY_ADDRESS")
        get_settings.cache_clear()


def test_a_two_node_load_run_merges_into_one_run(cluster, pg_url, fake, tmp_path, monkeypatch):
    """--load-nodes 2: the job's client processes are Ray actors on both nodes; one run holds every request."""
    db = open_database(pg_url)
    workload = {"prompt_tokens": 8, "output_tokens": 6, "requests": 16, "warmup_requests": 0,
                "arrival": "concurrency", "max_concurrency": 4, "load_nodes": 2}  # fmt: skip
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "openai", "base_url": fake.base_url, "model_name": "fake"},
            "workload": workload,
            "name": "two-node load",
        }
    )
    seen = len(fake.seen.bodies)
    monkeypatch.setenv("LATENCYLAB_RAY_LOAD_CPUS", "0.25")  # beside the job's own half CPU on each 1-CPU node
    job_id = jobs.submit(db, spec, timeout_s=240)
    proc = start_executor(pg_url, cluster, tmp_path, "--once", "--ray-num-cpus", "0.5")
    assert proc.wait(timeout=240) == 0, _executor_log(tmp_path)
    job = jobs.get_job(db, job_id)
    assert job.status == "done", (job.error, job.log_tail)
    run = runs.get_run(db, job.run_id)
    assert run.metrics["completed"] == 16 and run.metrics["total_output_tokens"] == 16 * 6
    sent = run.provenance["client_processes"]
    assert sent["processes"] == 2 and sum(sent["requests"]) == 16
    nodes = {n["node_id"]: n for n in sent["nodes"]}
    assert set(nodes) == {cluster.head_id, cluster.node_id}, sent
    assert all(n["requests"] > 0 and n["processes"] == 1 for n in nodes.values())
    # one host: the same CLOCK_MONOTONIC, so the estimated offsets are within their round trips
    assert all(
        abs(off) <= 1000 * rtt
        for n in nodes.values()
        for off, rtt in zip(n["clock_offsets_ns"], n["rtt_us"], strict=True)
    )
    stored = runs.get_requests(db, job.run_id)
    assert len(stored) == 16 and all(len(r.chunk_ns) == 6 and r.chunk_ns[0] > r.send_ns for r in stored)
    assert len(fake.seen.bodies) - seen == 16


def test_a_node_killed_mid_job_fails_it_with_its_reason_and_one_outcome(cluster, pg_url, fake, tmp_path):
    db = open_database(pg_url)
    fake.itl_s = 0.1
    try:
        job_id = jobs.submit(db, openai_spec(fake, "node dies", output_tokens=400), timeout_s=300)
        proc = start_executor(pg_url, cluster, tmp_path, "--ray-resources", json.dumps({NODE_RESOURCE: 1}))
        try:
            wait_for(lambda: jobs.get_job(db, job_id).measuring_started, 60)
            _stop_group(cluster.node, 0)  # SIGKILL the second node's processes
            job = wait_for(lambda: (j := jobs.get_job(db, job_id)).status != "running" and j, 60)
            time.sleep(2)  # anything late (a second outcome, the job's own result) would land now
        finally:
            stop(proc)
    finally:
        fake.itl_s = 0.0
    assert job.status == "failed", job.error
    assert job.error.startswith(f"ray node {cluster.node_id} (") and job.error.endswith(") died"), job.error
    again = jobs.get_job(db, job_id)
    assert (again.status, again.error, again.run_id) == (job.status, job.error, job.run_id)
    run = runs.get_run(db, job.run_id)
    assert run.status == "failed" and run.error == job.error
    assert [r.id for r in runs.list_runs(db) if r.job_id == job_id] == [run.id]
    wait_for(lambda: not job_pids(job_id), 10)


def test_bad_input_is_one_line_exit_2(cluster, tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    ray_args = ["--executor", "ray", "--ray-address"]
    for extra in (
        ["--executor", "nope"],
        [*ray_args, f"127.0.0.1:{_free_port()}"],  # nothing listens there
        [*ray_args, cluster.address, "--ray-resources", '{"no_such_resource": 1}'],
        [*ray_args, cluster.address, "--ray-resources", "[1"],
    ):
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "engine", "worker", "--db", url, *extra], cwd=REPO, capture_output=True, text=True
        )
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert time.monotonic() - started < 30


def _executor_log(tmp_path: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(tmp_path.glob("executor-*.log")))


def test_a_stopped_task_that_keeps_running_never_stalls_the_loop(cluster):
    """Ray marks a cancelled stream's end at once; reading it then waits for the task itself. The loop must
    not: it has the forced stop and every other job's timeout to see to (a CI run stalled 42 s on this)."""
    from engine.jobs.ray_placement import RayJob, RayPlacement

    def _deaf_to_a_soft_cancel():  # defined here: Ray ships it by value (the tests are not on its workers' path)
        """A task like a job's that has not yet seen its soft cancel (Ray does not always interrupt a sleep)."""
        import time

        yield {"facts": {"node_id": "n", "node_ip": "127.0.0.2"}}
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                time.sleep(0.1)
            except KeyboardInterrupt:
                pass
        yield {"returncode": 0, "tail": ""}

    placement = RayPlacement(["cpu"], address=cluster.address, ship_code=False)
    remote = ray.remote(_deaf_to_a_soft_cancel).options(num_returns="streaming", num_cpus=0)
    task = placement.tasks[1] = RayJob(job_id=1, gen=remote.remote())
    wait_for(lambda: placement.collect(timeout_s=0.2) == [] and task.facts, 60)
    placement.stop(task)
    for _ in range(10):  # two seconds of rounds after the soft cancel: each returns at once, the task still runs
        t0 = time.monotonic()
        assert placement.collect(timeout_s=0.2) == []
        assert time.monotonic() - t0 < 2.0
    placement.force(task)
    ended = wait_for(lambda: placement.collect(timeout_s=0.2), 20)
    assert [e.handle.job_id for e in ended] == [1] and ended[0].lost is None
    assert placement.tasks == {}
