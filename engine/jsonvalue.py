"""The types of JSON data as the project passes it around: stored specs, metrics, provenance, facts, messages.

``JSONObject`` is what ``json.loads`` gives for an object and what every stored JSON column holds; use it
instead of ``dict[str, Any]`` wherever the values are JSON, and a dataclass or a concrete type wherever they
are not. Nothing here is checked at run time: the names say what a function takes and gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JSONScalar: TypeAlias = None | bool | int | float | str
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject: TypeAlias = dict[str, JSONValue]
JSONMapping: TypeAlias = Mapping[str, JSONValue]  # read only: a stored spec's section, a run's metrics
JSONList: TypeAlias = Sequence[JSONValue]
