"""Every traffic input checked in one place, before any model loads and before any job is queued.

:func:`check_traffic` is what pre-flight runs (:func:`engine.run.preflight.preflight`), so ``run``,
``submit``, ``sweep``, Launch and the job's own process give the same answer: the source's planner
reads its whole input (:meth:`engine.run.sources.Planner.check`: a trace to its last row, a
dataset's every record, a prompt file; with the model's light tokenizer, the job's own plan) and
either says what the job would send (requests, the schedule's length, what it counted) or refuses
in one line naming the file, the line and the field. Progress lines never come before it: the
model is not loaded yet, and nothing else prints.

The answer is cached by the input's content (its sha256), the traffic's options, the workload's
fields and the model's context, under the data folder's ``cache/traffic-checks``: the job's own
pre-flight in its process (the same spec, the same file) is then instant, and a file changed on
disk is read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from engine.jsonvalue import JSONObject
from engine.run.sources import PlanContext, planner_of
from engine.spec import JobSpec, SpecError
from engine.spec.sources.base import TrafficSource

CACHE_VERSION = 1  # bump when a planner's check changes what it refuses or says


@dataclass(frozen=True)
class TrafficCheck:
    """What a job's traffic would send (``facts``: ``requests``, ``duration_s`` for a schedule, counts), and
    whether the answer came from the cache."""

    facts: JSONObject
    cached: bool = False

    def words(self, traffic: TrafficSource) -> str:
        """``trace replay t.jsonl (mooncake): 456 requests over 2.0 min`` (the schedule up front)."""
        n = self.facts.get("requests")
        count = f"{n:,} requests" if isinstance(n, int) else "its requests"
        seconds = self.facts.get("duration_s")
        over = f" over {_duration(float(seconds))}" if isinstance(seconds, (int, float)) else ""
        extra = [str(self.facts[k]) for k in ("capped",) if self.facts.get(k)]
        if self.facts.get("filtered"):
            extra.append(f"{self.facts['filtered']:,} rows outside the prompt limits left out")
        return f"{traffic.words()}: {count}{over}" + "".join(f"; {e}" for e in extra)


def check_traffic(spec: JobSpec) -> TrafficCheck:
    """The spec's traffic checked before anything loads (module doc); SpecError in one line."""
    from engine.run.sources.context import plan_context

    traffic = spec.workload.traffic
    if traffic.needs_tokenizer and spec.model.kind == "synthetic":
        raise SpecError(
            f"the {traffic.label} source needs a model with a tokenizer; synthetic weights take --prompt-tokens"
        )
    ctx, _no_tokenizer = plan_context(spec.model)
    limit = spec.recipe.context_limit()  # an endpoint declared smaller than the model's config: clipped as the job is
    if limit is not None and (ctx.context_length is None or limit < ctx.context_length):
        ctx = replace(ctx, context_length=limit)
    key = _key(spec, ctx)
    found = _read(key) if key else None
    if found is not None:
        return TrafficCheck(found, cached=True)
    facts = planner_of(traffic).check(traffic, spec.workload, ctx)
    if key:
        _write(key, facts)
    return TrafficCheck(facts)


def _key(spec: JobSpec, ctx: PlanContext) -> str | None:
    """The cache key of a check: the input's content hash and everything that decides the answer; None for traffic
    without a local input file (synthetic prompts: instant anyway; a Hub dataset: nothing local to hash)."""
    from engine.data.reading import content_hash

    traffic = spec.workload.traffic
    path = traffic.input_path()
    if path is None or not Path(path).expanduser().exists():
        return None
    payload = {
        "version": CACHE_VERSION,
        "content": content_hash(path),
        "traffic": traffic.model_dump(mode="json", exclude={"source_sha256"}),
        "workload": {**spec.workload.model_dump(mode="json", exclude={"traffic"})},
        "model": spec.model.source,
        "context": ctx.context_length,
        "tokenizer": ctx.tokenizer is not None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _folder() -> Path:
    from engine.settings import get_settings

    return get_settings().data_dir / "cache" / "traffic-checks"


def _read(key: str) -> JSONObject | None:
    try:
        data = json.loads((_folder() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(key: str, facts: JSONObject) -> None:
    """Kept atomically (a reader never sees half a file); a cache that cannot be written is no error."""
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(facts, out, default=str)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        return


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"
