"""Where a run is stored: its identity from the spec, the run's row, and (for a job) the job and worker
that must still hold it. The one place a run becomes a :class:`storage.runs.NewRun`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject
from engine.measure.records import RequestRecord
from engine.spec import JobSpec

if TYPE_CHECKING:
    from storage import Database
    from storage.runs import NewRun


@dataclass(frozen=True)
class Where:
    """Where a run is stored: the database, its spec and, for a job, the job and its worker."""

    db: Database | None
    spec: JobSpec
    job_id: int | None
    sweep: str | None
    worker_id: str | None

    def store(
        self,
        status: str,
        metrics: JSONObject | None,
        prov: JSONObject,
        requests: list[RequestRecord],
        error: str | None,
        quality: JSONObject | None = None,
        series: dict[str, JSONObject] | None = None,
    ) -> int | None:
        """Save the run (one transaction); its id, or None without a database."""
        if self.db is None:
            return None
        from storage.runs import save_run

        run = new_run(self.spec, status, error, job_id=self.job_id, device_name=prov.get("device_name"))
        run.sweep, run.provenance, run.metrics, run.quality = self.sweep, prov, metrics, quality
        run.requests, run.worker_id, run.series = requests, self.worker_id, dict(series or {})
        return save_run(self.db, run)


def new_run(spec: JobSpec, status: str, error: str | None, **extra: object) -> NewRun:
    """A :class:`storage.runs.NewRun` for ``spec`` (identity from the spec; figures filled in by the caller)."""
    from storage.runs import NewRun

    return NewRun(
        status=status,
        spec=spec.model_dump(mode="json"),
        fingerprint=spec.fingerprint(),
        model=spec.model.label,
        engine=spec.recipe.engine,
        device=spec.device,
        name=spec.name,
        error=error,
        **extra,
    )
