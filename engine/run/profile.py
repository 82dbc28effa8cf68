"""The profile phase (``workload.profile_steps``): after the measured phase, never inside it.

``profile_steps`` decode steps of the same recipe on the same loaded backend, with one batch
of the measured prompts, under ``torch.profiler`` (:mod:`engine.backends.transformers.profile`):
the run's ``profile`` record (``NewRun.series["profile"]``) holds the top operators and the
path of a gzipped Chrome/Perfetto trace under ``<data_dir>/profiles/``. Engines whose model
runs in another process (``vllm``'s engine core, ``vllm-server``, ``openai``) cannot be
profiled from the job: the run says so once (log line and record), and nothing else changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.backends.base import Backend
from engine.jsonvalue import JSONObject
from engine.settings import get_settings
from engine.spec import JobSpec, engines

if TYPE_CHECKING:
    from engine.run.runner import ProgressState


def trace_path(fingerprint: str, data_dir: Path | None = None) -> Path:
    """``<data_dir>/profiles/<fingerprint>-<timestamp>.json.gz`` (a new name per profile)."""
    folder = (data_dir or get_settings().data_dir) / "profiles"
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"{time.time_ns() % 1_000_000_000 // 1_000_000:03d}"
    return folder / f"{fingerprint}-{stamp}.json.gz"


def unavailable_reason(spec: JobSpec) -> str | None:
    """Why this job's recipe cannot be profiled here, or None."""
    engine = spec.recipe.engine
    descriptor = engines.find(engine)
    if descriptor is None or not descriptor.capabilities.profiles:  # the descriptor says whether it profiles
        return f"profiling not available for {engine}"
    if spec.recipe.world_size(spec.device) > 1:
        return "profiling not available with tensor parallelism"
    return None


def profile_phase(
    spec: JobSpec, backend: Backend, prompts: list[list[int]], state: ProgressState, log: Callable[[str], None]
) -> dict[str, JSONObject]:
    """``{"profile": record}`` for ``NewRun.series`` ({} without ``profile_steps``); ``prompts``: the measured ones."""
    steps = spec.workload.profile_steps
    if not steps:
        return {}
    why = unavailable_reason(spec)
    if why is not None:
        log(why)
        return {"profile": {"steps": steps, "available": False, "note": why, "activities": [], "top": []}}
    from engine.backends.transformers.profile import profile_decode

    state.enter("profiling", f"{steps} decode steps under torch.profiler")
    batch = prompts[: spec.workload.batch_size]
    record = profile_decode(backend, batch, steps, trace_path(spec.fingerprint()))
    record["available"] = True
    top = record["top"][0] if record["top"] else None
    lead = f"; top operator {top['name']} ({top['share_pct']:.0f} %)" if top else ""
    log(f"profile: {record['steps']} decode steps in {record['profile_s']:.1f} s{lead}; trace {record['trace_file']}")
    return {"profile": record}
