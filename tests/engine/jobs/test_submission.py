"""engine.jobs.submission: the served devices are those of workers with a fresh heartbeat (one window
for every caller), and a GPU this machine does not have is submittable only when a live worker serves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from engine.jobs.submission import LIVE_WORKER_S, check_submittable, live_workers, served_devices
from engine.measure import devices
from engine.spec import SpecError, parse_job_spec
from storage import jobs
from storage.models import WorkerRow


def _age(db, worker_id: str, seconds: float) -> None:
    with db.session() as s:
        old = datetime.now(UTC) - timedelta(seconds=seconds)
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(heartbeat_at=old))


def test_only_workers_with_a_fresh_heartbeat_serve(db):
    jobs.register_worker(db, "fresh", "h1", 1, ["cpu", "cuda:0"])
    jobs.register_worker(db, "stale", "h2", 2, ["cuda:1"])
    jobs.register_worker(db, "stopped", "h3", 3, ["cuda:2"])
    _age(db, "stale", LIVE_WORKER_S + 5)
    jobs.stop_worker(db, "stopped")
    assert [w.id for w in live_workers(db)] == ["fresh"]
    assert served_devices(db) == {"cpu", "cuda:0"}


def test_a_gpu_this_machine_lacks_is_submittable_only_when_served(db, monkeypatch):
    monkeypatch.setattr(devices, "detect_devices", lambda ignore_pids=None: [devices.cpu_device()])
    spec = parse_job_spec({"model": {"source": "synthetic:llama-3.2-1b"}, "device": "cuda:3"})
    with pytest.raises(SpecError, match="cuda:3 does not exist on this machine"):
        check_submittable(db, spec)
    jobs.register_worker(db, "gpu-host", "elsewhere", 1, ["cuda:3"])
    check_submittable(db, spec)  # checked again on that host when the job starts
