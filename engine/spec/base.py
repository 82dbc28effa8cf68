"""The shared base of every spec: strict pydantic models, the spec error, canonical JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class SpecError(ValueError):
    """A spec that cannot be run, with a message that says what would work."""


class _Strict(BaseModel):
    # allow_inf_nan=False: an infinity or NaN is rejected at validation, so it never reaches
    # storage (it is not JSON) nor a metric (a comparison with NaN is always false).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Every field's default value (fields with a default factory are left out)."""
        return {name: info.default for name, info in cls.model_fields.items() if info.default_factory is None}


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def format_validation_error(exc: ValidationError) -> str:
    """One readable line per problem, joined with '; '."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not a knob of this spec)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
