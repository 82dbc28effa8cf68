"""How a task is named: a local JSONL file, a local lm-eval YAML definition, or an
lm-evaluation-harness task name; and the key its figures are stored under."""

from __future__ import annotations

from pathlib import Path


def is_local(name: str) -> bool:
    """A task given as a JSONL file rather than an lm-eval task name."""
    return name.endswith(".jsonl")


def is_lm_eval_yaml(name: str) -> bool:
    """A task given as a local lm-evaluation-harness task definition (a YAML file)."""
    return name.endswith((".yaml", ".yml"))


def task_key(name: str) -> str:
    """The name used in the stored keys: the file's stem for local tasks."""
    return Path(name).stem if is_local(name) or is_lm_eval_yaml(name) else name
