"""Pre-flight of an OpenAI-compatible server's job: the API key's variable is set (its value is never read here),
and a job with load nodes knows a Ray cluster (engine/jobs/ray_load.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from engine.spec.base import SpecError

if TYPE_CHECKING:
    from engine.spec.job import JobSpec


def check(spec: JobSpec, runtime: bool) -> None:
    """SpecError when the recipe names an API key variable this environment does not set."""
    env_name = getattr(spec.recipe, "api_key_env", None)
    if env_name and not os.environ.get(env_name):
        raise SpecError(f"the API key variable {env_name} is not set; export {env_name}=... before running")
    if runtime and spec.workload.load_nodes:
        from engine.settings import ray_address

        if not ray_address():
            raise SpecError(
                f"load_nodes {spec.workload.load_nodes}: no Ray cluster to spread the load over; run the job "
                "with `python -m engine worker --executor ray`, or set LATENCYLAB_RAY_ADDRESS"
            )
