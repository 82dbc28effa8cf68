"""What every request source declares (pure): its options, its words, and how a flat form names it.

A request source is one class here, a subclass of :class:`TrafficSource` with ``source:
Literal["<name>"]`` and one typed, described field per option, registered by one line in
:mod:`engine.spec.sources` (its planner, the code that turns the options into requests once
the model is loaded, lives in :mod:`engine.run.sources` and is named here as ``"module:Class"``).
``Workload.traffic`` holds exactly one of them; nobody works out which source a workload has
from which fields happen to be filled: it says so (``workload.traffic.source``).

Two flat forms remain, and only :mod:`engine.spec.sources.flat` reads them: specs stored before
``Workload.traffic`` existed (their traffic fields sat beside the workload's others) and the
command line's flags. A source declares the flat fields that name it (:attr:`TrafficSource.selected_by`).
Its flat form (:meth:`TrafficSource.flat`) is also what fingerprints and the stored knobs hold,
so every fingerprint stored before the typed field stays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from engine.jsonvalue import JSONObject
from engine.spec.base import _Strict
from engine.spec.rules import Dependency

if TYPE_CHECKING:
    from engine.spec.workload import Workload

# The flat workload's traffic fields of before Workload.traffic, at their defaults: a stored spec's field at its
# default here said nothing (every stored spec held all of them), and fingerprints leave them out at these values.
LEGACY_FLAT_DEFAULTS: JSONObject = {
    "prompt_tokens": None,
    "prompt_file": None,
    "prompt_length": "fixed",
    "prompt_length_spread": 0.0,
    "dataset": None,
    "dataset_format": "sharegpt",
    "dataset_column": None,
    "min_prompt_tokens": None,
    "max_prompt_tokens": None,
    "source_output_lengths": True,
    "multi_turn": False,
    "think_time_s": 0.0,
    "prefix_count": None,
    "prefix_tokens": None,
    "trace": None,
    "trace_format": "mooncake",
    "time_scale": 1.0,
    "trace_start_s": 0.0,
    "trace_duration_s": None,
    "source_sha256": None,
}
# Flat fields fingerprints always kept, even at their defaults (every run before the typed field had them).
ALWAYS_IN_FINGERPRINT: tuple[str, ...] = ("prompt_tokens", "prompt_file")
SHA256_PATTERN = r"^[0-9a-f]{64}$"


@dataclass(frozen=True)
class ExtraFlag:
    """A command-line flag of a source beyond its fields' own (``--trace-window START:DURATION``): ``parse`` turns
    its text (``True`` for a switch) into flat fields, raising ValueError in one line."""

    flag: str
    help: str
    parse: Callable[[str | bool], JSONObject]
    metavar: str | None = None  # None: a switch (store_true)


class TrafficSource(_Strict):
    """Where a workload's requests come from: one registered source and its options (module doc)."""

    source: str

    label: ClassVar[str]  # the choice in words ("trace replay")
    summary: ClassVar[str]  # one line of help for the choice
    planner: ClassVar[str]  # "module:Class" of its planner in engine.run.sources (imported when a job plans)
    selected_by: ClassVar[tuple[str, ...]] = ()  # flat fields that, set, name this source (old specs, CLI flags)
    file_field: ClassVar[str | None] = None  # the option naming its input file or dataset (hashed, allowed roots)
    scheduled: ClassVar[bool] = False  # it brings its own due times: no arrival process applies
    sessions: ClassVar[bool] = False  # its requests are turns of sessions (later prompts built when due)
    needs_tokenizer: ClassVar[bool] = False  # it reads text: a model without a tokenizer cannot plan it
    legacy: ClassVar[bool] = False  # a source of before the typed field: its flat form names no "source"
    default_requests: ClassVar[int | None] = None  # ``requests`` when the workload gives none (a trace: all rows)
    labels: ClassVar[dict[str, str]] = {}  # its fields in words with their units (forms, messages)
    launch_start: ClassVar[JSONObject] = {}  # Launch's first values of its fields (where not the defaults)
    extra_flags: ClassVar[tuple[ExtraFlag, ...]] = ()
    dependencies: ClassVar[tuple[Dependency, ...]] = ()  # options used only with another's value (forms hide them)

    # -- its words -------------------------------------------------------------------------------
    def title(self) -> str:
        """Its short name in run titles, legends and job lists (a file's base name, never a path or a hash)."""
        return self.label

    def words(self) -> str:
        """The traffic in a phrase with its file and format (Launch's summary, the preview, a run's traffic)."""
        return self.title()

    # -- what it reads and checks ------------------------------------------------------------------
    def input_path(self) -> str | None:
        """The local file or folder its requests come from (None: none, or a hub dataset)."""
        value = getattr(self, self.file_field) if self.file_field else None
        return None if value is None or str(value).startswith("hf:") else str(value)

    def content_hash(self) -> str | None:
        """Its input file's content hash, pinned when the job was queued (None: not yet, or no file)."""
        return self.source_sha256 if isinstance(self, FileInput) else None

    def own_output_lengths(self) -> bool:
        """Whether its requests ask for their rows' own output lengths (else ``output_tokens`` each)."""
        return isinstance(self, OutputLengths) and self.source_output_lengths

    def nominal_prompt_tokens(self) -> int | None:
        """The prompt length its requests are planned around, where the options say one (estimates, the context
        check before loading); None: the input says."""
        return None

    def one_prompt_length(self) -> bool:
        """Whether every request's prompt has the same length (a compiled model compiles once)."""
        return False

    def problems(self, workload: Workload) -> list[str]:
        """What contradicts itself between these options and the workload's other fields (pure)."""
        return []

    # -- the flat form (fingerprints, stored knobs, old specs, the command line) --------------------------
    def flat(self) -> JSONObject:
        """Its options as flat workload fields (module doc): a source of before the typed field as specs stored
        them then; any other with its name under ``source``."""
        own = self.model_dump(mode="json", exclude={"source"})
        if not self.legacy:
            return {"source": self.source, **own}
        fields = type(self).model_fields
        later = {k for k, v in own.items() if k not in LEGACY_FLAT_DEFAULTS and v == fields[k].default}
        own = {k: v for k, v in own.items() if k not in later}  # options added since: at their default, unsaid
        return {**LEGACY_FLAT_DEFAULTS, **own, **self.flat_extras()}

    def flat_extras(self) -> JSONObject:
        """Flat fields that name this source without being options of it (sessions: ``multi_turn``)."""
        return {}

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Its options' names, in the order forms show them: its own first, then those of the option groups it
        takes in (shared prefixes, output lengths, the file's hash)."""
        own = {
            n
            for k in cls.__mro__
            if isinstance(k, type) and issubclass(k, TrafficSource)
            for n in vars(k).get("__annotations__", {})
        }
        names = [n for n in cls.model_fields if n != "source"]
        return tuple(sorted(names, key=lambda n: n not in own))

    @classmethod
    def flat_names(cls) -> frozenset[str]:
        """The flat fields it reads: its options and those that name it."""
        return frozenset((*cls.option_names(), *cls.selected_by))


def base_name(path: str | None) -> str:
    """A file's base name for titles and legends (a hub id as it is)."""
    if not path:
        return "?"
    return path if path.startswith("hf:") else PurePath(path).name or path


class FileInput(_Strict):
    """Options of a source that reads a file: the file's content hash, part of the fingerprint, set when queued."""

    source_sha256: str | None = Field(
        default=None, pattern=SHA256_PATTERN, description="The input file's content hash (set when queued)"
    )


class OutputLengths(_Strict):
    """Options of a source whose rows carry their own output lengths."""

    source_output_lengths: bool = Field(
        default=True,
        description="Output lengths from the dataset or trace (off: output_tokens for every request)",
    )


class SharedPrefixOptions(_Strict):
    """Shared prefixes: K system prompts of N tokens from the corpus; each request takes one (seeded)."""

    prefix_count: int | None = Field(default=None, ge=1, le=100_000, description="Shared prefixes: how many")
    prefix_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Shared prefixes: tokens each")

    def prefix_problems(self) -> list[str]:
        """Both or neither of the two."""
        if (self.prefix_count is None) != (self.prefix_tokens is None):
            return ["shared prefixes need both prefix_count and prefix_tokens"]
        return []

    def prefix_words(self) -> str:
        return f", {self.prefix_count} shared prefixes of {self.prefix_tokens} tokens" if self.prefix_count else ""


PREFIX_LABELS: dict[str, str] = {
    "prefix_count": "Shared prefixes (how many)",
    "prefix_tokens": "Shared prefix length (tokens)",
}
FILE_LABELS: dict[str, str] = {
    "source_sha256": "Input file hash (SHA-256)",
    "source_output_lengths": "Output lengths from the dataset or trace",
}
