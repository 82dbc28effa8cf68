"""The one place storage turns values into JSON text and back.

Writing: strict JSON only. A non-finite float (inf, -inf, NaN) has no JSON spelling;
Python's ``json`` would write ``Infinity``/``NaN``, which other readers (orjson, the
browser, PostgreSQL's json type) refuse. It is stored as ``null`` ("no value") instead.
Reading: strict too, so a row written before this rule (or by hand) raises
:class:`ValueError`, and each reader skips that row with a warning naming it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, cast

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject, JSONValue

log = logging.getLogger("storage")

try:  # orjson is strict (no NaN/Infinity) and several times faster on big frames
    from orjson import dumps as _fast_dumps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is in requirements.txt
    _fast_dumps = _fast_loads = None


def finite(value: object) -> object:
    """``value`` with every non-finite float inside it (dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(
    value: object,
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] | None = None,
    default: Callable[[object], object] | None = None,
) -> str:
    """Strict JSON text of ``value`` (non-finite floats become null); the options are ``json.dumps``'s."""
    if default is not None:  # stringify unknown objects first, so their floats are checked too
        value = json.loads(json.dumps(value, default=default))
    return json.dumps(finite(value), allow_nan=False, sort_keys=sort_keys, separators=separators)


def dumps_numbers(values: Sequence[float]) -> str:
    """Strict JSON text of a flat list of numbers (a request's stamps), as :func:`dumps` reads it.

    orjson writes a non-finite float as ``null`` too, ten times faster than the general path
    (a large run stores millions of stamps); anything orjson refuses takes :func:`dumps`."""
    if _fast_dumps is not None:
        try:
            return str(_fast_dumps(values), "utf-8")
        except TypeError:  # e.g. an integer beyond 64 bits
            pass
    return dumps(values)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> JSONValue:
    """Parse strict JSON; ``NaN``/``Infinity`` or broken text raise ValueError."""
    if _fast_loads is not None:
        return _fast_loads(text)  # orjson.JSONDecodeError is a ValueError
    return json.loads(text, parse_constant=_refuse_constant)


def loads_or_none(text: str | bytes | None) -> JSONValue:
    """:func:`loads`, with None for no text."""
    return None if text is None else loads(text)


def loads_object(text: str | bytes) -> JSONObject:
    """:func:`loads` of a column storage writes from a dict (a spec, metrics, a definition): typed as the object
    it holds, not checked (a reader that needs a dict checks it, as before)."""
    return cast("JSONObject", loads(text))


def loads_object_or_none(text: str | bytes | None) -> JSONObject | None:
    """:func:`loads_object`, with None for no text (or a stored ``null``)."""
    return cast("JSONObject | None", loads_or_none(text))


def skip_warning(kind: str, row_id: object, exc: Exception) -> None:
    """Say (once per read) that one stored row was left out because it cannot be read."""
    log.warning("skipping %s %s: its stored JSON cannot be read (%s)", kind, row_id, exc)
