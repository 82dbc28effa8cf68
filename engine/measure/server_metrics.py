"""The serving engine's own view during the measured phase: its Prometheus ``/metrics``, scraped.

For the ``vllm-server`` and ``openai`` engines a :class:`ServerScraper` reads the server's
``/metrics`` (its base URL without ``/v1``) every ``interval_s`` (500 ms) in a daemon thread
beside the measured phase, parses it with ``prometheus_client``'s text parser and keeps
the few figures a user needs to explain latency, under stable field names whatever the
server (``raw_names`` says which metric each came from):

- ``num_requests_running``, ``num_requests_waiting``: requests the server is computing on
  and queueing (vLLM ``vllm:num_requests_running`` / ``_waiting``; TGI ``tgi_batch_current_size``
  / ``tgi_queue_size``; SGLang ``sglang:num_running_reqs`` / ``sglang:num_queue_reqs``);
- ``kv_cache_usage_perc``: the KV cache in use as a fraction, 1.0 = full, as vLLM reports it
  (``vllm:kv_cache_usage_perc``, older ``vllm:gpu_cache_usage_perc``; SGLang ``sglang:token_usage``);
- ``num_preemptions_total``: preemptions since the measured phase started (vLLM's counter
  minus its value at the first scrape);
- ``prefix_cache_hit_rate``: prefix-cache hits over queries since the measured phase started
  (vLLM's ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``; SGLang's
  ``sglang:cache_hit_rate``); None until a query was counted;
- ``iterations_total``, ``iteration_tokens_total``: engine steps and the tokens they scheduled since the
  measured phase started (vLLM's ``vllm:iteration_tokens_total`` histogram's count and sum): the serving
  simulator's calibration compares its steps with them (engine/whatif/predict).

Samples with several label sets (engines, models) are summed; fractions take the largest.
Stamps are ``time.perf_counter_ns()`` like every request stamp of the run
(:mod:`engine.measure.records`): ``t0_ns`` is the scraper's start (the measured phase's),
``t_s`` seconds since it. A server without ``/metrics`` (HTTP 404, connection refused) gives
no series and one note (``"server has no /metrics (HTTP 404)"``).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from engine.jsonvalue import JSONMapping, JSONObject

FIELDS: tuple[str, ...] = (
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "num_preemptions_total",
    "prefix_cache_hit_rate",
    "iterations_total",
    "iteration_tokens_total",
)
_SINCE_FIRST = ("num_preemptions_total", "iterations_total", "iteration_tokens_total")  # counters from the phase start
# Per server: field (or a counter the rates need, "_..."), its metric names by preference.
SOURCES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "num_requests_running": ("vllm:num_requests_running",),
        "num_requests_waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage_perc": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "num_preemptions_total": ("vllm:num_preemptions_total",),
        "_prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "_prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),  # vLLM v0's own gauge
        "iterations_total": ("vllm:iteration_tokens_total_count",),
        "iteration_tokens_total": ("vllm:iteration_tokens_total_sum",),
    },
    "tgi": {
        "num_requests_running": ("tgi_batch_current_size",),
        "num_requests_waiting": ("tgi_queue_size",),
    },
    "sglang": {
        "num_requests_running": ("sglang:num_running_reqs",),
        "num_requests_waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage_perc": ("sglang:token_usage",),
        "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
    },
}
_FRACTIONS = {"kv_cache_usage_perc", "prefix_cache_hit_rate"}
_PREFIXES = (("vllm:", "vllm"), ("tgi_", "tgi"), ("sglang:", "sglang"))
NO_METRICS = "server has no /metrics"
Fetch = Callable[[str, float], str]


class NoMetrics(RuntimeError):
    """The server has no ``/metrics`` endpoint (404, refused, not Prometheus text)."""


def metrics_url(base_url: str | None) -> str | None:
    """``http://host:port/metrics`` for an OpenAI base URL (``.../v1`` dropped); None without one."""
    if not base_url:
        return None
    return base_url.rstrip("/").removesuffix("/v1").rstrip("/") + "/metrics"


def sample_totals(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text, summed over label sets (fractions: the largest); raises ValueError."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            value = float(sample.value)
            if value != value:  # NaN: no figure
                continue
            if sample.name not in out:
                out[sample.name] = value
            elif sample.name.endswith(("_perc", "token_usage", "hit_rate")):
                out[sample.name] = max(out[sample.name], value)
            else:
                out[sample.name] += value
    return out


def detect_source(totals: dict[str, float]) -> str:
    """``vllm``, ``tgi``, ``sglang`` (by their metric prefixes) or ``unknown``."""
    for prefix, source in _PREFIXES:
        if any(name.startswith(prefix) for name in totals):
            return source
    return "unknown"


def map_fields(totals: dict[str, float], source: str) -> tuple[dict[str, float], dict[str, str]]:
    """(value per field, metric name per field) for the metrics this server exposes."""
    values: dict[str, float] = {}
    names: dict[str, str] = {}
    for field, candidates in SOURCES.get(source, {}).items():
        for name in candidates:
            if name in totals:
                values[field], names[field] = totals[name], name
                break
    return values, names


def fetch_text(url: str, timeout_s: float) -> str:
    """GET a metrics page; :class:`NoMetrics` when the server has none, OSError for a passing failure."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        raise NoMetrics(f"{NO_METRICS} (HTTP {exc.code})") from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            raise NoMetrics(f"{NO_METRICS} (connection refused)") from exc
        raise OSError(str(exc.reason)) from exc


class ServerSeries:
    """The scraped samples, turned into the stored ``server_metrics`` record."""

    def __init__(self, t0_ns: int, interval_ms: float) -> None:
        self.t0_ns, self.interval_ms = t0_ns, interval_ms
        self.t_s: list[float] = []
        self.rows: list[dict[str, float]] = []
        self.source = "unknown"
        self.raw_names: dict[str, str] = {}
        self.errors = 0
        self._first: dict[str, float] = {}

    def add(self, t_ns: int, text: str) -> None:
        """One scrape at ``t_ns``; text that does not parse counts as an error."""
        try:
            totals = sample_totals(text)
        except ValueError:
            self.errors += 1
            return
        if not self.rows:
            self.source = detect_source(totals)
        values, names = map_fields(totals, self.source)
        self.raw_names.update(names)
        if "_prefix_queries" in names and "prefix_cache_hit_rate" not in names:
            self.raw_names["prefix_cache_hit_rate"] = f"{names.get('_prefix_hits', '?')} / {names['_prefix_queries']}"
        if not self.rows:
            self._first = dict(values)
        self.rows.append(self._derived(values))
        self.t_s.append((t_ns - self.t0_ns) / 1e9)

    def _derived(self, values: dict[str, float]) -> dict[str, float]:
        out = {k: v for k, v in values.items() if not k.startswith("_")}
        for counter in _SINCE_FIRST:
            if counter in out:
                out[counter] -= self._first.get(counter, 0.0)
        if "_prefix_queries" in values and "prefix_cache_hit_rate" not in out:
            queries = values["_prefix_queries"] - self._first.get("_prefix_queries", 0.0)
            hits = values.get("_prefix_hits", 0.0) - self._first.get("_prefix_hits", 0.0)
            out["prefix_cache_hit_rate"] = hits / queries if queries > 0 else None  # type: ignore[assignment]
        return out

    def body(self) -> JSONObject:
        """The stored record: ``interval_ms``, ``t0_ns``, ``t_s``, ``fields``, ``source``, ``raw_names``."""
        present = [f for f in FIELDS if any(f in row for row in self.rows)]
        return {
            "interval_ms": self.interval_ms,
            "t0_ns": self.t0_ns,
            "t_s": [round(t, 4) for t in self.t_s],
            "fields": {f: [row.get(f) for row in self.rows] for f in present},
            "source": self.source,
            "raw_names": {f: self.raw_names[f] for f in present if f in self.raw_names},
            "errors": self.errors,
        }


class ServerScraper:
    """Scrapes ``url`` between ``start()`` and ``stop()``; a no-op without a URL (in-process engines)."""

    def __init__(
        self, url: str | None, interval_s: float = 0.5, timeout_s: float = 2.0, fetch: Fetch = fetch_text
    ) -> None:
        self.url, self.interval_s, self.timeout_s, self._fetch = url, interval_s, timeout_s, fetch
        self.note: str | None = None
        self._series: ServerSeries | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _scrape(self, first: bool = False) -> None:
        """One scrape, stamped at the middle of its request; only the first raises :class:`NoMetrics`."""
        assert self._series is not None
        t_before = time.perf_counter_ns()
        try:
            text = self._fetch(self.url or "", self.timeout_s)
        except (NoMetrics, OSError) as exc:
            if first and isinstance(exc, NoMetrics):
                raise
            self._series.errors += 1
            return
        self._series.add((t_before + time.perf_counter_ns()) // 2, text)
        if first and not self._series.rows:
            raise NoMetrics(f"{NO_METRICS} (not Prometheus text)")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scrape()

    def start(self) -> ServerScraper:
        """First scrape now (a server without /metrics stops here, with a note), then every ``interval_s``."""
        if self.url is None:
            return self
        self._series = ServerSeries(time.perf_counter_ns(), self.interval_s * 1000)
        try:
            self._scrape(first=True)
        except NoMetrics as exc:
            self.note, self._series = str(exc), None
            return self
        self._thread = threading.Thread(target=self._loop, name="server-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after one last scrape."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._scrape()

    def series(self) -> dict[str, JSONObject]:
        """``{"server_metrics": body}`` for ``NewRun.series``, or {} when nothing was scraped."""
        if self._series is None or not self._series.rows:
            return {}
        return {"server_metrics": self._series.body()}

    def notes(self) -> dict[str, str]:
        """``{"server_metrics": why}`` for the run's provenance when the server has no /metrics."""
        return {"server_metrics": self.note} if self.note else {}

    def __enter__(self) -> ServerScraper:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def summarize(body: JSONMapping | None) -> dict[str, float | None]:
    """Peaks of a stored ``server_metrics`` record: running, waiting, KV-cache usage, preemptions, last hit rate."""
    fields = (body or {}).get("fields") or {}

    def values(name: str) -> list[float]:
        return [float(v) for v in fields.get(name) or [] if isinstance(v, (int, float))]

    def peak(name: str) -> float | None:
        got = values(name)
        return max(got) if got else None

    rates = values("prefix_cache_hit_rate")
    return {
        "peak_running": peak("num_requests_running"),
        "peak_waiting": peak("num_requests_waiting"),
        "peak_kv_cache_usage_perc": peak("kv_cache_usage_perc"),
        "preemptions": peak("num_preemptions_total"),
        "prefix_cache_hit_rate": rates[-1] if rates else None,
    }
