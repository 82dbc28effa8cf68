"""Jobs as Ray tasks: the placement of ``python -m engine worker --executor ray``. The worker's one
loop (:class:`engine.jobs.worker.Worker`) claims, stops, times out and ends the jobs; this module
only puts each on a cluster node and says how it ended.

Each claimed job becomes one task (:func:`engine.jobs.ray_task.run_job`, a streaming generator)
asking for what the job needs (engine/jobs/ray_cluster.py); on its node the task starts the same
job process the local worker starts, which writes progress, its log tail and its run to the shared
database. The tasks are watched with ``ray.wait``:

* a stop is a soft ``ray.cancel`` (the task stops the job's group, SIGTERM then SIGKILL); a forced
  stop, ``ray.cancel(force=True)``, kills the task's worker process, and the job process, orphaned,
  kills its own group;
* a task that dies without an outcome waits up to NODE_DEATH_WAIT_S for Ray to declare its node
  dead; the job's place is then reported lost, "ray node <id> (<ip>) died" (or the task's own
  error), and the loop gives it back once if it had not started measuring, else fails it;
* at most ``max_in_flight`` jobs run at once (by default the cluster's CPUs over each job's CPUs).

Ray is imported inside the functions only (a contract in pyproject.toml).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from engine.jobs.placing import Ended, WorkerInfo, say
from engine.measure.provenance import git_commit

if TYPE_CHECKING:
    from storage.jobs import JobInfo

NODE_DIED = "ray node {node} ({ip}) died"
NODE_DEATH_WAIT_S = 30.0  # a task that died waits this long for Ray to declare its node dead (health checks)


class _Stream(Iterator[object], Protocol):
    """A task's ObjectRefGenerator: Ray's references to what the task yields, in order."""

    def completed(self) -> object:
        """A reference that is ready once the task has ended."""
        ...


class _RemoteCall(Protocol):
    def remote(self, *args: object) -> _Stream: ...


class _RemoteFunction(Protocol):
    """:func:`run_job` as a Ray remote function (``ray.remote(run_job)``)."""

    def options(self, **options: object) -> _RemoteCall: ...


@dataclass
class RayJob:
    """One claimed job's task."""

    job_id: int
    gen: _Stream
    facts: dict[str, str] | None = None
    stopped: bool = False
    failed: tuple[float, str] | None = None  # (when, first line): the task died; is its node dead too?


class RayPlacement:
    """Jobs as tasks on the Ray cluster at ``address`` (connected here; ClusterUnavailable when it cannot be)."""

    worker_id_prefix = "ray:"

    def __init__(
        self,
        devices: list[str] | None = None,
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        resources: dict[str, float] | None = None,
        max_in_flight: int | None = None,
        dashboard_url: str | None = None,
        ship_code: bool = True,
    ) -> None:
        from engine.jobs import ray_cluster

        ray_cluster.connect(address, ship_code=ship_code)
        nodes = ray_cluster.alive_nodes()
        missing = [r for r in resources or {} if not any(r in n.get("Resources", {}) for n in nodes)]
        if missing:  # its jobs would wait for ever, each holding its claim
            raise ray_cluster.ClusterUnavailable(f"no node of the Ray cluster offers {', '.join(missing)}")
        self.cluster = ray_cluster.cluster_summary(nodes)
        self.devices = list(devices or ray_cluster.cluster_devices(nodes))
        self.num_cpus, self.resources = num_cpus, dict(resources or {})
        total_cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
        self.max_in_flight = max_in_flight or max(1, int(total_cpus // max(num_cpus, 1e-9)))
        self.dashboard_url = dashboard_url
        self.tasks: dict[int, RayJob] = {}
        self._remote: _RemoteFunction | None = None
        self.git_commit = git_commit()  # the code each job's runtime environment ships

    def claimable(self) -> list[str]:
        return list(self.devices) if len(self.tasks) < self.max_in_flight else []

    def start(self, job: JobInfo, worker: WorkerInfo) -> RayJob:
        import ray

        from engine.jobs import ray_cluster
        from engine.jobs.ray_task import run_job

        options = ray_cluster.task_options(job.device, self.num_cpus, self.resources)
        if self._remote is None:
            self._remote = ray.remote(run_job)
        remote = self._remote.options(name=f"latencylab-job-{job.id}", num_returns="streaming", **options)
        extra = {
            "worker_id": worker.worker_id,
            "git_commit": self.git_commit or "",
            **({"ray_dashboard": self.dashboard_url} if self.dashboard_url else {}),
        }
        gen = remote.remote(job.id, worker.db_url, job.device, job.attempts, worker.grace_s, extra)
        task = self.tasks[job.id] = RayJob(job_id=job.id, gen=gen)
        say(f"job {job.id} submitted to Ray for {job.device} ({json.dumps(options.get('resources'))})")
        return task

    def stop(self, handle: RayJob) -> None:
        import ray

        handle.stopped = True
        if handle.failed is None:  # a dead task's end is judged, not cancelled
            ray.cancel(handle.gen, force=False)  # the task stops the job's group (SIGTERM, SIGKILL after the grace)

    def force(self, handle: RayJob) -> None:
        import ray

        if handle.failed is not None:
            return
        try:
            ray.cancel(handle.gen, force=True)
        except (ValueError, TypeError) as exc:  # a generator Ray will not force-cancel: the soft cancel stands
            say(f"job {handle.job_id}: forced cancel refused ({exc})")

    def collect(self, timeout_s: float = 0.0) -> list[Ended[RayJob]]:
        """Judge the dead tasks, then read what the live ones yielded: where each runs, how the ended ones ended.

        A stopped task is read only once it has completed: Ray marks a cancelled stream's end at once, and
        reading it (``next``, ``is_finished``) then waits for the task itself, which a task that has not yet
        seen its soft cancel keeps running, so the loop would stall until the job ended, its forced stop and
        every other job's timeout with it."""
        import ray

        now = time.monotonic()
        dead = [(t, t.failed) for t in self.tasks.values() if t.failed is not None]
        ended = [e for t, failed in dead if (e := self._judge(t, failed, now)) is not None]
        live = [t for t in self.tasks.values() if t.failed is None]
        running = [t for t in live if not t.stopped]
        stopped = [t for t in live if t.stopped]
        if running:
            wait = 0.0 if stopped else timeout_s
            ready, _ = ray.wait([t.gen for t in running], num_returns=len(running), timeout=wait)
            by_gen = {id(t.gen): t for t in running}
            ended += [e for gen in ready if (e := self._advance(by_gen[id(gen)])) is not None]
        if stopped:
            refs = {t.gen.completed(): t for t in stopped}
            done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
            ended += [self._drain(refs[ref]) for ref in done]
        if not live and not ended and timeout_s > 0:
            time.sleep(timeout_s)
        for end in ended:
            del self.tasks[end.handle.job_id]
        return ended

    def _drain(self, task: RayJob) -> Ended[RayJob]:
        """A stopped task that has completed: what it left in its stream (reading no longer waits)."""
        while (end := self._advance(task)) is None:
            pass
        return end

    def progress(self, handle: RayJob) -> str | None:
        return None  # the task stores its job's log tail itself (its log file is on its node)

    def _advance(self, task: RayJob) -> Ended[RayJob] | None:
        """Take the task's next item: its node facts, its outcome, or the error that ended it."""
        import ray

        try:
            item = ray.get(next(task.gen))
        except StopIteration:
            return Ended(task, -9, None)
        except ray.exceptions.RayError as exc:
            return self._task_failed(task, exc)
        if "facts" in item:
            task.facts = item["facts"]
            say(f"job {task.job_id} runs on ray node {task.facts['node_id']} ({task.facts['node_ip']})")
            return None
        return Ended(task, int(item["returncode"]), item.get("tail") or "")

    def _task_failed(self, task: RayJob, exc: Exception) -> Ended[RayJob] | None:
        """The task ended without an outcome: stopped by us, or its node (or its worker process) died."""
        if task.stopped:
            return Ended(task, -15, None)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        task.failed = (time.monotonic(), f"ray task failed: {type(exc).__name__}: {first}"[:500])
        return self._judge(task, task.failed, task.failed[0])

    @staticmethod
    def _judge(task: RayJob, failed: tuple[float, str], now: float) -> Ended[RayJob] | None:
        """A dead task's place is lost once Ray says its node died ("ray node … died"), or, after
        NODE_DEATH_WAIT_S (or at once when its node is not known), with the task's own failure."""
        from engine.jobs import ray_cluster

        when, reason = failed
        facts = task.facts or {}
        node = facts.get("node_id")
        if node and not ray_cluster.node_alive(node):
            reason = NODE_DIED.format(node=node, ip=facts.get("node_ip", "?"))
        elif node and now - when < NODE_DEATH_WAIT_S:
            return None  # ask again next round
        return Ended(task, -9, None, lost=reason)
