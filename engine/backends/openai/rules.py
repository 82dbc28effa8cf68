"""What an OpenAI-compatible server's recipe can be (pure): a URL, the NAME of the key's variable, no local limits."""

from __future__ import annotations

import re

from engine.spec.rules import Dependency

DEPENDENCIES: tuple[Dependency, ...] = ()  # every knob is used whatever the others are
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def base_url_problem(url: str) -> str | None:
    """Why ``url`` is not a server base URL, or None."""
    if not url.startswith(("http://", "https://")):
        return f"base_url {url!r} must start with http:// or https://"
    return None


def api_key_env_problem(name: str | None) -> str | None:
    """Why ``name`` is not the name of an environment variable (a pasted key is refused), or None."""
    if name is not None and not _ENV_NAME.match(name):
        return "api_key_env is the NAME of an environment variable (letters, digits, _), not the key"
    return None


def job_problems(device: str, model_kind: str | None = None) -> list[str]:
    """Nothing about the local device or the model's kind limits a remote server."""
    return []
