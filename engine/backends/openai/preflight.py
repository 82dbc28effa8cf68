"""Pre-flight of an OpenAI-compatible server's job: the API key's variable is set (its value is never read here)."""

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
