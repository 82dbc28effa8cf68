"""One serving job's load from several Ray nodes: ``--load-nodes K`` (workload ``load_nodes``).

The job's process stays the one scheduler (engine/run/driver.py drives
:class:`~engine.backends.openai.process_pool.ClientProcesses` as with local client processes);
:class:`RayLauncher` only starts its client processes elsewhere: a placement group of K bundles with
STRICT_SPREAD (K different nodes), one :class:`ClientActor` per client process in them (dealt over
the bundles in turn), each connecting back to a TCP port the job's process listens on at its node's
address, proving itself with a one-time token, and then serving the same messages a local client
process serves on its socket pair (engine/backends/openai/client_process.py). Each actor's ready
message says its node; the driver estimates that node's clock offset from timed round trips and
records it (see process_pool.py).

Where the cluster is: the Ray task that runs the job passes its GCS address
(``LATENCYLAB_JOB_RAY_ADDRESS``); a job of the local worker uses ``LATENCYLAB_RAY_ADDRESS``. Each
actor asks for ``LATENCYLAB_RAY_LOAD_CPUS`` CPUs (1 by default). The job's process loads this module
(and Ray) only when its spec asks for load nodes; only the openai engine can (its endpoint is one
other nodes reach: a server the job starts listens on its own loopback).
"""

from __future__ import annotations

import secrets
import socket
import time
from typing import Protocol

from engine.backends.base import BackendError, Handle, LauncherFactory, Progress
from engine.backends.openai import channel
from engine.spec import JobSpec

ACCEPT_TIMEOUT_S = 120.0  # actors start in a fresh worker process, after the runtime environment is set up
PLACE_TIMEOUT_S = 60.0
TOKEN_BYTES = 16


class ClientActor:
    """A client process on a Ray node (made a Ray actor by :class:`RayLauncher`)."""

    def serve(self, host: str, port: int, token: bytes, index: int) -> int:
        """Connect to the driver, say who it is, serve it until it stops (blocks for the whole run)."""
        import ray

        from engine.backends.openai.client_process import serve_socket

        sock = socket.create_connection((host, port), timeout=30)
        sock.settimeout(None)
        sock.sendall(token + index.to_bytes(4, "big"))
        facts = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
        }
        return serve_socket(sock, facts)


class _PlacementGroup(Protocol):
    """What is asked of a Ray placement group here (``ray.util.placement_group.PlacementGroup``)."""

    def wait(self, timeout_seconds: float) -> bool: ...


class _ActorHandle:
    """One client actor as :class:`ClientProcesses` knows a process (``actor`` and ``ref``: Ray's handle of the
    actor and of its ``serve`` call, only ever handed back to Ray)."""

    def __init__(self, actor: object, ref: object) -> None:
        self.actor, self.ref, self.pid = actor, ref, 0

    def _error(self) -> str | None:
        import ray

        ready, _ = ray.wait([self.ref], timeout=0)
        if not ready:
            return None
        try:
            ray.get(self.ref)
        except ray.exceptions.RayError as exc:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        return ""

    def exit_code(self) -> int | None:
        return None if self._error() is None else 1

    def last_words(self) -> str:
        return self._error() or ""

    def stop(self) -> None:
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - an actor already gone is stopped
            pass


class RayLauncher:
    """Starts client processes as Ray actors spread over ``nodes`` nodes."""

    remote = True

    def __init__(self, nodes: int, address: str | None = None, cpus: float | None = None) -> None:
        from engine.settings import get_settings, ray_address

        settings = get_settings()
        self.nodes = nodes
        self.address = address or ray_address()
        self.cpus = cpus if cpus is not None else settings.ray_load_cpus
        self._group: _PlacementGroup | None = None
        self._handles: list[_ActorHandle] = []
        self._listener: socket.socket | None = None

    def launch(self, n: int, progress: Progress) -> list[tuple[socket.socket, Handle]]:
        """``n`` actors on ``nodes`` nodes, each connected back; BackendError in one line otherwise."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from engine.jobs import ray_cluster

        if not self.address:
            raise BackendError(
                f"load_nodes {self.nodes}: no Ray cluster to spread the load over "
                "(run the job with `worker --executor ray`, or set LATENCYLAB_RAY_ADDRESS)"
            )
        try:
            ray_cluster.connect(self.address)
        except ray_cluster.ClusterUnavailable as exc:
            raise BackendError(f"load_nodes {self.nodes}: {exc}") from exc
        alive = len(ray_cluster.alive_nodes())
        if alive < self.nodes:
            raise BackendError(f"load_nodes {self.nodes}: the Ray cluster has {alive} live node(s)")
        per_bundle = [len(range(b, n, self.nodes)) for b in range(self.nodes)]
        progress(f"placing {n} client processes on {self.nodes} Ray nodes", None)
        self._group = placement_group([{"CPU": self.cpus * k} for k in per_bundle], strategy="STRICT_SPREAD")
        if not self._group.wait(timeout_seconds=PLACE_TIMEOUT_S):
            raise BackendError(
                f"load_nodes {self.nodes}: the Ray cluster cannot place {n} client processes of "
                f"{self.cpus:g} CPU on {self.nodes} different nodes within {PLACE_TIMEOUT_S:g} s"
            )
        host = ray.util.get_node_ip_address()
        self._listener = socket.create_server((host, 0))
        port = self._listener.getsockname()[1]
        token = secrets.token_bytes(TOKEN_BYTES)
        remote_class = ray.remote(max_restarts=0, max_task_retries=0)(ClientActor)
        for index in range(n):
            strategy = PlacementGroupSchedulingStrategy(self._group, placement_group_bundle_index=index % self.nodes)
            actor = remote_class.options(num_cpus=self.cpus, scheduling_strategy=strategy).remote()
            self._handles.append(_ActorHandle(actor, actor.serve.remote(host, port, token, index)))
        return self._accept(n, token)

    def _accept(self, n: int, token: bytes) -> list[tuple[socket.socket, Handle]]:
        """The actors' connections, in their indices' order (a wrong token is closed and ignored)."""
        assert self._listener is not None
        deadline = time.monotonic() + ACCEPT_TIMEOUT_S
        socks: dict[int, socket.socket] = {}
        while len(socks) < n:
            for index, handle in enumerate(self._handles):
                if index not in socks and (err := handle._error()) is not None:
                    raise BackendError(f"client process {index} on Ray ended before connecting: {err or 'no reason'}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(
                    f"{n - len(socks)} of {n} client processes on Ray did not connect within {ACCEPT_TIMEOUT_S:g} s"
                )
            self._listener.settimeout(min(1.0, left))
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(10.0)
            try:
                hello = channel.recv_exactly(conn, TOKEN_BYTES + 4)
            except OSError:
                conn.close()
                continue
            index = int.from_bytes(hello[TOKEN_BYTES:], "big")
            if not secrets.compare_digest(hello[:TOKEN_BYTES], token) or not 0 <= index < n or index in socks:
                conn.close()
                continue
            conn.settimeout(None)
            socks[index] = conn
        return [(socks[i], self._handles[i]) for i in range(n)]

    def close(self) -> None:
        """Kill the actors, remove the placement group, stop listening."""
        from ray.util.placement_group import remove_placement_group

        for handle in self._handles:
            handle.stop()
        self._handles.clear()
        if self._group is not None:
            try:
                remove_placement_group(self._group)
            except Exception:  # noqa: BLE001 - the cluster may be gone; its group went with it
                pass
            self._group = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None


def load_launcher(spec: JobSpec) -> LauncherFactory | None:
    """The launcher the runner hands client processes to when ``spec`` asks for load nodes (``--load-nodes``), else
    None: whoever runs a job (its process, the CLI) hands it down, so no lower layer imports this module."""
    return RayLauncher if spec.workload.load_nodes else None
