"""The Ray executor: ``python -m engine worker --executor ray``. It claims queued jobs from the
database like the local worker and runs each as a Ray task on a cluster node.

Each claimed job becomes one task (:func:`engine.jobs.ray_task.run_job`, a streaming generator)
asking for what the job needs (engine/jobs/ray_cluster.py); on its node the task starts the same
job process the local worker starts, which writes progress and its run to the shared database.
The executor watches the tasks with ``ray.wait`` and keeps every promise of the local worker
(it *is* a :class:`~engine.jobs.worker.Worker`: heartbeat, recovery of lost workers, suites, ticks):

* a cancel asked by a user, a timeout or a shutdown cancels the task (the task stops the job's
  group, SIGTERM then SIGKILL); if it has not ended after the grace period, ``ray.cancel(force=True)``
  kills the task's worker process, and the job process, orphaned, kills its own group;
* a node that dies mid-job: the job goes back to the queue once if it had not started measuring
  (the same rule as a lost worker), else it fails with "ray node <id> (<ip>) died" and a failed run;
* every job ends once, through :func:`engine.jobs.outcomes.end_job` and the claim checks of storage.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from engine.jobs.outcomes import end_job
from engine.jobs.worker import Worker, _say
from engine.measure.provenance import git_commit

NODE_DIED = "ray node {node} ({ip}) died"
NODE_DEATH_WAIT_S = 30.0  # a task that died waits this long for Ray to declare its node dead (health checks)


@dataclass
class RayJob:
    """One claimed job and the task that runs it."""

    job: Any
    gen: Any  # the task's ObjectRefGenerator
    deadline: float
    facts: dict[str, str] | None = None
    stop_reason: str | None = None
    cancel_sent: float | None = None
    forced: bool = False
    failed: tuple[float, str] | None = None  # (when, first line): the task died; is its node dead too?


class RayExecutor(Worker):
    """Serves jobs for ``devices`` from ``db_url`` on the Ray cluster at ``address``."""

    def __init__(
        self,
        db_url: str,
        devices: list[str] | None = None,
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        resources: dict[str, float] | None = None,
        max_in_flight: int | None = None,
        dashboard_url: str | None = None,
        ship_code: bool = True,
        **worker_options: Any,
    ) -> None:
        from engine.jobs import ray_cluster

        ray_cluster.connect(address, ship_code=ship_code)
        nodes = ray_cluster.alive_nodes()
        missing = [r for r in resources or {} if not any(r in n.get("Resources", {}) for n in nodes)]
        if missing:  # its jobs would wait for ever, each holding its claim
            raise ray_cluster.ClusterUnavailable(f"no node of the Ray cluster offers {', '.join(missing)}")
        self.cluster = ray_cluster.cluster_summary(nodes)
        super().__init__(db_url, devices or ray_cluster.cluster_devices(nodes), **worker_options)
        self.id = f"ray:{self.id}"
        self.num_cpus, self.resources = num_cpus, dict(resources or {})
        total_cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
        self.max_in_flight = max_in_flight or max(1, int(total_cpus // max(num_cpus, 1e-9)))
        self.dashboard_url = dashboard_url
        self.tasks: dict[int, RayJob] = {}
        self.finished: list[int] = []
        self._remote: Any = None
        self.git_commit = git_commit()  # the code each job's runtime environment ships

    # -- the round --------------------------------------------------------------------------
    def step(self) -> bool:
        """One round: housekeeping, stop what must stop, collect ended tasks, claim. True when idle."""
        from storage import jobs

        now = time.monotonic()
        cancel_ids = self._housekeeping(now, list(self.tasks))
        for task in list(self.tasks.values()):
            self._watch(task, now, cancel_ids)
        ended = len(self.finished)
        self._collect()
        self._tick(now, len(self.finished) > ended)
        claimed = False
        while not self._stopping and len(self.tasks) < self.max_in_flight:
            job = jobs.claim(self.db, self.id, [s.device for s in self.slots])
            if job is None:
                break
            claimed = True
            self._submit(job)
        return not claimed and not self.tasks

    def _watch(self, task: RayJob, now: float, cancel_ids: set[int]) -> None:
        """Judge a dead task; stop one cancelled or past its timeout; force one that ignored its stop."""
        if task.failed is not None:
            self._judge_failure(task, now)
        elif task.stop_reason is None and task.job.id in cancel_ids:
            self._stop(task, "cancelled")
        elif task.stop_reason is None and now > task.deadline:
            self._stop(task, f"timed out after {task.job.timeout_s:g} s")
        elif task.cancel_sent is not None and not task.forced and now - task.cancel_sent > self.grace_s:
            self._force(task)

    def shutdown(self) -> None:
        """Stop running tasks, give their jobs back to the queue, sign off."""
        from storage import jobs

        for task in self.tasks.values():
            if task.stop_reason is None:
                self._stop(task, "shutdown")
        deadline = time.monotonic() + self.grace_s + 10.0
        while self.tasks and time.monotonic() < deadline:
            for task in self.tasks.values():
                if not task.forced and time.monotonic() - (task.cancel_sent or 0) > self.grace_s:
                    self._force(task)
            self._collect(timeout_s=0.2)
        for task in list(self.tasks.values()):  # tasks Ray did not end in time: ended without their return code
            self._end(task, -9, self._stored_tail(task))
        jobs.stop_worker(self.db, self.id)
        _say(f"{self.id} stopped")

    # -- one job ----------------------------------------------------------------------------
    def _submit(self, job: Any) -> None:
        import ray

        from engine.jobs import ray_cluster
        from engine.jobs.ray_task import run_job
        from engine.secrets import register_spec
        from storage import jobs

        register_spec(job.spec)
        options = ray_cluster.task_options(job.device, self.num_cpus, self.resources)
        if self._remote is None:
            self._remote = ray.remote(run_job)
        remote = self._remote.options(name=f"latencylab-job-{job.id}", num_returns="streaming", **options)
        extra = {
            "worker_id": self.id,
            "git_commit": self.git_commit or "",
            **({"ray_dashboard": self.dashboard_url} if self.dashboard_url else {}),
        }
        gen = remote.remote(job.id, self.db_url, job.device, job.attempts, self.grace_s, extra)
        self.tasks[job.id] = RayJob(job=job, gen=gen, deadline=time.monotonic() + job.timeout_s)
        jobs.mark_started(self.db, job.id, self.id)
        _say(f"job {job.id} submitted to Ray for {job.device} ({json.dumps(options.get('resources'))})")

    def _stop(self, task: RayJob, reason: str) -> None:
        import ray

        task.stop_reason, task.cancel_sent = reason, time.monotonic()
        ray.cancel(task.gen, force=False)  # the task stops the job's group (SIGTERM, SIGKILL after the grace)

    def _force(self, task: RayJob) -> None:
        import ray

        task.forced = True
        try:
            ray.cancel(task.gen, force=True)
        except (ValueError, TypeError) as exc:  # a generator Ray will not force-cancel: the soft cancel stands
            _say(f"job {task.job.id}: forced cancel refused ({exc})")

    def _collect(self, timeout_s: float = 0.0) -> None:
        """Read what the tasks yielded: where each runs, and how the ended ones ended."""
        import ray

        live = [t for t in self.tasks.values() if t.failed is None]  # a dead task's end is judged in step
        if not live:
            return
        ready, _ = ray.wait([t.gen for t in live], num_returns=len(live), timeout=timeout_s)
        by_gen = {id(t.gen): t for t in live}
        for gen in ready:
            self._advance(by_gen[id(gen)])

    def _advance(self, task: RayJob) -> None:
        """Take the task's next item: its node facts, its outcome, or the error that ended it."""
        import ray

        try:
            item = ray.get(next(task.gen))
        except StopIteration:
            self._end(task, -9, self._stored_tail(task))
            return
        except ray.exceptions.RayError as exc:
            self._task_failed(task, exc)
            return
        if "facts" in item:
            task.facts = item["facts"]
            _say(f"job {task.job.id} runs on ray node {task.facts['node_id']} ({task.facts['node_ip']})")
        else:
            self._end(task, int(item["returncode"]), item.get("tail") or "")

    def _task_failed(self, task: RayJob, exc: Exception) -> None:
        """The task ended without an outcome: stopped by us, or its node (or its worker process) died."""
        if task.stop_reason is not None:
            self._end(task, -15, self._stored_tail(task))
            return
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        task.failed = (time.monotonic(), f"ray task failed: {type(exc).__name__}: {first}"[:500])
        self._judge_failure(task, task.failed[0])

    def _judge_failure(self, task: RayJob, now: float) -> None:
        """A dead task's job ends once Ray says its node died (or, after NODE_DEATH_WAIT_S, as the task's
        failure): back in the queue once if it had not started measuring, else failed with the reason."""
        from engine.jobs import ray_cluster
        from storage import jobs

        when, reason = task.failed
        facts = task.facts or {}
        node = facts.get("node_id")
        if node and not ray_cluster.node_alive(node):
            reason = NODE_DIED.format(node=node, ip=facts.get("node_ip", "?"))
        elif now - when < NODE_DEATH_WAIT_S and node:
            return  # ask again next round
        current = jobs.get_job(self.db, task.job.id)
        if current is not None and not current.measuring_started and (current.attempts or 0) <= 1:
            if jobs.requeue(self.db, task.job.id, self.id, count_attempt=True):
                _say(f"job {task.job.id}: {reason} before measuring; back in the queue (one retry)")
                self._forget(task)
                return
        task.stop_reason = reason  # a failure with this reason (job_outcome), and its failed run
        self._end(task, -9, self._stored_tail(task))

    def _end(self, task: RayJob, returncode: int, tail: str) -> None:
        _say(end_job(self.db, task.job, self.id, task.stop_reason, returncode, tail))
        self._forget(task)

    def _forget(self, task: RayJob) -> None:
        self.tasks.pop(task.job.id, None)
        self.finished.append(task.job.id)

    def _stored_tail(self, task: RayJob) -> str:
        """The log tail the task last wrote to the job (its log file is on its node)."""
        from storage import jobs

        current = jobs.get_job(self.db, task.job.id)
        return (current.log_tail or "") if current is not None else ""
