"""A Ray cluster as the executor sees it: connecting (one line when it cannot), what it offers
(devices, a summary like ``ray: 2 nodes — 8 × H100, 4 × A100``), and what a job asks of it.

A job's device maps to Ray resources as follows: ``cpu`` asks for ``num_cpus`` (1 by default,
``LATENCYLAB_RAY_NUM_CPUS``) and no GPU; ``cuda:0`` for one GPU; a group ``cuda:0,1`` for two GPUs
on one node, through a placement group of one bundle with STRICT_PACK (the tensor-parallel ranks are
processes of the job's own process, so they share its node). Which GPU indices a job named does not
matter on Ray: Ray picks the GPUs and the job process is pinned to them. Extra custom resources
(``--ray-resources '{"latencylab_test_node": 1}'`` or ``{"accelerator_type:H100": 0.001}``) are asked
for by every job the executor runs, to keep its jobs on the nodes that have them.
Ray is imported inside the functions only.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Sequence

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.devices import gpu_indices
from engine.settings import REPO_ROOT

CONNECT_TIMEOUT_S = 5.0
# Ship the project's code with each job (Ray's working_dir), less what is not code.
# (gitignore syntax: "/data" is the top-level data folder only, not engine/data.)
CODE_EXCLUDES = ["/.git", "/.venv", "/data", "/tests", "__pycache__", "/.ruff_cache", "/.pytest_cache", "/.streamlit"]
# Environment that travels from the executor to the job processes besides LATENCYLAB_* settings.
PASSED_ENV = ("HF_HUB_OFFLINE", "HF_HOME", "TOKENIZERS_PARALLELISM", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")
NOT_PASSED = ("LATENCYLAB_EXECUTOR", "LATENCYLAB_RAY_ADDRESS")


class ClusterUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached: one line for the user."""


def check_reachable(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A ``host:port`` (or ``ray://host:port``) address answers a TCP connect within ``timeout_s``."""
    if not address or address == "auto" or ":" not in address:
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as exc:
        raise ClusterUnavailable(f"no Ray cluster at {address}: {exc}") from exc


def runtime_env(ship_code: bool = True) -> JSONObject:
    """The jobs' runtime environment: the project's code and the executor's settings."""
    env = {k: v for k, v in os.environ.items() if k.startswith("LATENCYLAB_") and k not in NOT_PASSED}
    env = {k: v for k, v in env.items() if not k.startswith("LATENCYLAB_JOB_")}
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    out: JSONObject = {"env_vars": env}
    if ship_code:
        out["working_dir"] = str(REPO_ROOT)
        out["excludes"] = CODE_EXCLUDES
    else:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return out


def connect(address: str | None, *, ship_code: bool = True) -> None:
    """``ray.init`` on ``address`` (``None``/``auto``: the cluster this host belongs to), never starting one."""
    check_reachable(address)
    try:
        import ray
    except ImportError as exc:
        raise ClusterUnavailable("Ray is not installed: pip install ray (see requirements-dev.txt)") from exc
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES", "")  # CODE_EXCLUDES say what stays home
    if ray.is_initialized():
        return
    try:
        ray.init(
            address=address or "auto",
            namespace="latencylab",
            runtime_env=runtime_env(ship_code),
            log_to_driver=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ClusterUnavailable(f"cannot connect to the Ray cluster at {address or 'auto'}: {first}") from exc


def alive_nodes() -> list[JSONObject]:
    """The cluster's live nodes (``ray.nodes()`` entries)."""
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def node_alive(node_id: str) -> bool:
    """Whether the node with this id is still alive."""
    return any(n.get("NodeID") == node_id for n in alive_nodes())


def cluster_devices(nodes: Sequence[JSONMapping]) -> list[str]:
    """The device slots jobs may name on this cluster: ``cpu``, and ``cuda:0`` .. up to the largest node's GPUs."""
    most = max((int(n.get("Resources", {}).get("GPU", 0)) for n in nodes), default=0)
    return (["cpu"] if any(n.get("Resources", {}).get("CPU", 0) for n in nodes) else []) + [
        f"cuda:{i}" for i in range(most)
    ]


def cluster_summary(nodes: Sequence[JSONMapping]) -> str:
    """``ray: 2 nodes — 8 × H100, 4 × A100`` (GPUs by accelerator type), or ``... — 16 CPUs`` without GPUs."""
    gpus: Counter[str] = Counter()
    cpus = 0
    for node in nodes:
        res = node.get("Resources", {})
        cpus += int(res.get("CPU", 0))
        kinds = [k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")]
        if res.get("GPU"):
            gpus[kinds[0] if kinds else "GPU"] += int(res["GPU"])
    parts = [f"{n} × {kind}" for kind, n in gpus.most_common()] or [f"{cpus} CPUs"]
    return f"ray: {len(nodes)} node{'s' if len(nodes) != 1 else ''} — {', '.join(parts)}"


def task_options(device: str, num_cpus: float, resources: dict[str, float]) -> dict[str, object]:
    """What a job on ``device`` asks of Ray (see the module docstring); the placement group, if any, is made."""
    gpus = len(gpu_indices(device))
    options: dict[str, object] = {
        "num_cpus": num_cpus,
        "num_gpus": gpus,
        "resources": dict(resources),
        "max_retries": 0,
    }
    if gpus > 1:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {"CPU": num_cpus, "GPU": float(gpus), **resources}
        group = placement_group([bundle], strategy="STRICT_PACK")
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
    return options


def describe(address: str | None) -> JSONObject:
    """The cluster as JSON-ready facts: its summary, the devices jobs may name, and each live node."""
    connect(address, ship_code=False)
    nodes = alive_nodes()
    return {
        "address": address or "auto",
        "summary": cluster_summary(nodes),
        "devices": cluster_devices(nodes),
        "max_gpus_per_node": max((int(n.get("Resources", {}).get("GPU", 0)) for n in nodes), default=0),
        "nodes": [
            {
                "node_id": n.get("NodeID"),
                "address": n.get("NodeManagerAddress"),
                "cpus": n.get("Resources", {}).get("CPU", 0),
                "gpus": n.get("Resources", {}).get("GPU", 0),
                "kinds": [k.split(":", 1)[1] for k in n.get("Resources", {}) if k.startswith("accelerator_type:")],
            }
            for n in nodes
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.jobs.ray_cluster describe [ADDRESS]``: the cluster's facts as one JSON object
    (the app runs this in a child process, so the Streamlit server never imports Ray); exit 2 with one
    line when there is no cluster."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "describe":
        print("usage: python -m engine.jobs.ray_cluster describe [ADDRESS]", file=sys.stderr)
        return 2
    try:
        print(json.dumps(describe(args[1] if len(args) > 1 else None)))
    except ClusterUnavailable as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
