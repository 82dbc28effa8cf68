"""The shared base of every spec: strict pydantic models, the spec error, canonical JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

_Model = TypeVar("_Model", bound=BaseModel)


class SpecError(ValueError):
    """A spec that cannot be run, with a message that says what would work."""


class _Strict(BaseModel):
    # allow_inf_nan=False: an infinity or NaN is rejected at validation, so it never reaches
    # storage (it is not JSON) nor a metric (a comparison with NaN is always false).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @classmethod
    def field_defaults(cls) -> dict[str, object]:
        """Every field's default value (fields with a default factory are left out)."""
        return {name: info.default for name, info in cls.model_fields.items() if info.default_factory is None}


def canonical_json(data: object) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


MAX_PROBLEMS = 6  # a spec of random junk has hundreds; the first ones say what to fix
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _loc_part(part: int | str) -> str:
    """One step of an error location: a field name as is, anything else quoted and cut (one line)."""
    text = str(part)
    if _PLAIN_KEY.fullmatch(text):
        return text
    return repr(text if len(text) <= 40 else text[:40] + "...")


def format_validation_error(exc: ValidationError) -> str:
    """One readable line: the first problems (location: message) joined with '; '."""
    parts = []
    errors = exc.errors()
    for err in errors[:MAX_PROBLEMS]:
        loc = ".".join(_loc_part(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = " ".join(err["msg"].removeprefix("Value error, ").split())
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not a knob of this spec)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    if len(errors) > MAX_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_PROBLEMS} more problems")
    return "; ".join(parts)


def validate_chosen(cls: type[_Model], value: Mapping[str, object], name: str, as_json: bool) -> _Model:
    """``value`` validated as ``cls`` (the class its key chose: an engine's recipe, a source's options), as JSON
    when the spec is (``as_json``), its errors located under ``name``."""
    try:
        if as_json:
            return cls.model_validate_json(json.dumps(dict(value)))
        return cls.model_validate(value)
    except ValidationError as exc:
        raise tagged_error(exc, name) from exc


def tagged_error(exc: ValidationError, name: str) -> ValidationError:
    """``exc`` with ``name`` first in every location (``recipe.transformers.gptq_bits``, ``traffic.trace.time_scale``):
    a section validated as the class its name picks keeps saying which one."""
    try:
        return ValidationError.from_exception_data(
            exc.title,
            [
                {
                    "type": e["type"],
                    "loc": (name, *e["loc"]),
                    "input": e["input"],
                    **({"ctx": e["ctx"]} if "ctx" in e else {}),
                }
                for e in exc.errors()
            ],
        )
    except (KeyError, TypeError):  # an error type that cannot be rebuilt keeps its own location
        return exc
