"""The worker's Prometheus endpoint (``python -m engine worker --metrics-port N``).

A custom collector on its own ``CollectorRegistry``, served by ``prometheus_client``'s HTTP
server in a daemon thread; every scrape reads the database afresh (its own connection):

- ``latencylab_worker_up{worker}``: 1 while the worker serves (0 once it is stopping);
- ``latencylab_workers_alive``: workers (any host) whose heartbeat is recent;
- ``latencylab_jobs{status}``: jobs in the queue by status;
- ``latencylab_running_jobs{device}``, ``latencylab_job_progress{job_id, device, phase}``: this
  worker's running jobs per slot, with their phase and progress (0..1);
- ``latencylab_device_<field>{device}``: device telemetry of the worker's devices, from
  :func:`engine.measure.telemetry.sample_devices` where that module exists, else a small
  psutil/NVML reading of its own (:func:`basic_sample`);
- ``latencylab_run_ttft_seconds{quantile}``, ``latencylab_run_tpot_seconds{quantile}``,
  ``latencylab_run_output_tokens_per_second``, ``latencylab_run_id``: the newest done run of each
  of the last ``RUN_SPECS`` (50) spec fingerprints, labelled ``fingerprint, model, engine,
  device, recipe`` (the recipe in words, :func:`engine.report.recipes.recipe_in_words`), so the
  label sets stay bounded.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

from engine.report.recipes import recipe_in_words
from engine.report.values import flat_metrics, flat_supported

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from engine.jobs.worker import Worker
    from storage import Database
    from storage.runs import RunSummary

RUN_SPECS = 50  # newest fingerprints exported (bounded label cardinality)
RUNS_SCANNED = 1000  # newest done runs read to find them
_RUN_LABELS = ("fingerprint", "model", "engine", "device", "recipe")
# (metric name, help, flat metric key, quantile label or None, factor to base units)
_RUN_FIGURES: tuple[tuple[str, str, str, str | None, float], ...] = (
    ("latencylab_run_ttft_seconds", "time to first token of the newest run per spec", "ttft_ms_p50", "0.5", 1e-3),
    ("latencylab_run_ttft_seconds", "time to first token of the newest run per spec", "ttft_ms_p99", "0.99", 1e-3),
    ("latencylab_run_tpot_seconds", "time per output token of the newest run per spec", "tpot_ms_p50", "0.5", 1e-3),
    (
        "latencylab_run_output_tokens_per_second",
        "output tokens/s of the newest run per spec",
        "output_tokens_per_s",
        None,
        1.0,
    ),
)
Sampler = Callable[[str], dict[str, float]]


def _metric_name(field: str) -> str:
    return "latencylab_device_" + re.sub(r"[^a-zA-Z0-9_]", "_", field).strip("_").lower()


def basic_sample(device: str) -> dict[str, float]:
    """A few figures of one device now: CPU utilisation, memory, load (psutil); GPU via NVML. {} on failure."""
    if device == "cpu":
        import psutil

        return {
            "cpu_util_pct": psutil.cpu_percent(interval=None),
            "memory_used_bytes": float(psutil.virtual_memory().used),
            "load_avg_1m": os.getloadavg()[0],
        }
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(device.split(":", 1)[1]))
            return {
                "gpu_util_pct": float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                "memory_used_bytes": float(pynvml.nvmlDeviceGetMemoryInfo(handle).used),
                "temperature_c": float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no such GPU, a field not supported: no figures
        return {}


def device_sampler() -> Sampler:
    """The telemetry module's ``sample_devices`` when it exists, else :func:`basic_sample`."""
    try:
        from engine.measure.telemetry import sample_devices  # type: ignore[import-not-found,attr-defined]
    except ImportError:
        return basic_sample
    return sample_devices


def single_devices(slots: list[str]) -> list[str]:
    """The single devices of the worker's slots (``cuda:1+2`` and ``cuda:1,2`` give cuda:1 and cuda:2)."""
    out: list[str] = []
    for slot in slots:
        if slot == "cpu":
            out.append("cpu")
            continue
        out += [f"cuda:{i}" for i in slot.split(":", 1)[1].replace("+", ",").split(",") if i.strip()]
    return list(dict.fromkeys(out))


class LabCollector:
    """Collects the lab's gauges on every scrape (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        worker_id: str,
        devices: list[str],
        sampler: Sampler | None = None,
        up: Callable[[], bool] = lambda: True,
    ) -> None:
        self.db, self.worker_id, self.devices = db, worker_id, single_devices(devices)
        self.slots = devices
        self.sampler = sampler or device_sampler()
        self.up = up
        self._labels: dict[int, tuple[str, ...]] = {}  # run id -> its label values (the recipe needs the spec)
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:  # two scrapes at once read the database one after the other
            yield from self._worker()
            yield from self._jobs()
            yield from self._telemetry()
            yield from self._runs()

    def _worker(self) -> Iterator[GaugeMetricFamily]:
        from engine.jobs.submission import live_workers

        up = GaugeMetricFamily("latencylab_worker_up", "1 while this worker serves jobs", labels=["worker"])
        up.add_metric([self.worker_id], 1.0 if self.up() else 0.0)
        yield up
        alive = live_workers(self.db)
        yield GaugeMetricFamily("latencylab_workers_alive", "workers with a recent heartbeat", value=len(alive))

    def _jobs(self) -> Iterator[GaugeMetricFamily]:
        from storage import jobs

        queue = GaugeMetricFamily("latencylab_jobs", "jobs in the queue by status", labels=["status"])
        for status, n in jobs.count_by_status(self.db).items():
            queue.add_metric([status], n)
        yield queue
        mine = [j for j in jobs.list_jobs(self.db, statuses=[jobs.RUNNING]) if j.worker_id == self.worker_id]
        per_slot = GaugeMetricFamily(
            "latencylab_running_jobs", "this worker's running jobs per slot", labels=["device"]
        )
        for slot in self.slots:
            per_slot.add_metric([slot], sum(1 for j in mine if j.device == slot))
        yield per_slot
        progress = GaugeMetricFamily(
            "latencylab_job_progress", "progress (0..1) of a running job", labels=["job_id", "device", "phase"]
        )
        for job in mine:
            progress.add_metric([str(job.id), job.device, job.phase or "starting"], float(job.progress or 0.0))
        yield progress

    def _telemetry(self) -> Iterator[GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        for device in self.devices:
            try:
                sample = self.sampler(device)
            except Exception:  # noqa: BLE001 - a device that does not answer is left out of this scrape
                continue
            for field, value in sorted(sample.items()):
                if not isinstance(value, (int, float)) or value != value:
                    continue
                name = _metric_name(field)
                family = families.setdefault(
                    name, GaugeMetricFamily(name, f"device telemetry: {field}", labels=["device"])
                )
                family.add_metric([device], float(value))
        yield from families.values()

    def _runs(self) -> Iterator[GaugeMetricFamily]:
        newest = self._newest_runs()
        families: dict[str, GaugeMetricFamily] = {}
        run_id = GaugeMetricFamily("latencylab_run_id", "id of the newest done run per spec", labels=list(_RUN_LABELS))
        for run in newest:
            labels = self._run_labels(run)
            run_id.add_metric(list(labels), run.id)
            flat = flat_metrics(run)
            for name, help_text, key, quantile, factor in _RUN_FIGURES:
                value = flat.get(key)
                if value is None or not flat_supported(run.metrics, key):  # a p99 of 4 requests is not exported
                    continue
                extra = ["quantile"] if quantile else []
                family = families.setdefault(name, GaugeMetricFamily(name, help_text, labels=[*_RUN_LABELS, *extra]))
                family.add_metric([*labels, *([quantile] if quantile else [])], value * factor)
        yield run_id
        yield from families.values()

    def _newest_runs(self) -> list[RunSummary]:
        from storage.runs import list_runs

        seen: dict[str, RunSummary] = {}
        for run in list_runs(self.db, limit=RUNS_SCANNED, status="done"):
            if run.fingerprint not in seen:
                seen[run.fingerprint] = run
                if len(seen) >= RUN_SPECS:
                    break
        return list(seen.values())

    def _run_labels(self, run: RunSummary) -> tuple[str, ...]:
        if run.id not in self._labels:
            from storage.runs import get_run

            detail = get_run(self.db, run.id)
            words = recipe_in_words(detail.spec if detail else None, run.engine)
            self._labels[run.id] = (run.fingerprint, run.model, run.engine, run.device, words)
            if len(self._labels) > 4 * RUN_SPECS:  # keep the cache as bounded as the labels
                self._labels.pop(next(iter(self._labels)))
        return self._labels[run.id]


class Exporter:
    """The endpoint's HTTP server; ``stop()`` shuts it down."""

    def __init__(self, server: WSGIServer, thread: threading.Thread, registry: CollectorRegistry) -> None:
        self.server, self.thread, self.registry = server, thread, registry

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_exporter(
    db_url: str,
    worker_id: str,
    devices: list[str],
    port: int,
    addr: str = "127.0.0.1",
    up: Callable[[], bool] = lambda: True,
    sampler: Sampler | None = None,
) -> Exporter:
    """Serve the lab's gauges at ``http://addr:port/metrics`` (port 0: a free one) until ``stop()``."""
    from storage import open_database

    registry = CollectorRegistry()
    registry.register(LabCollector(open_database(db_url), worker_id, devices, sampler, up))
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return Exporter(server, thread, registry)


def serve_worker(worker: Worker, port: int, addr: str = "127.0.0.1") -> Exporter:
    """The endpoint for a :class:`engine.jobs.worker.Worker` (its id, devices and database); OSError if the port is taken."""
    return start_exporter(worker.db_url, worker.id, list(worker.devices), port, addr, up=lambda: not worker.stopping)
