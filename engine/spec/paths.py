"""Every file a job reads, named by the spec field it comes from (pure: nothing is opened here).

:func:`input_paths` is the one list of a spec's inputs that the operator's allowed roots
govern (checked by :mod:`engine.run.policy`): the model, the draft model (transformers
``assistant_model``, vLLM ``speculative_model``), the prompt file, a local dataset, a trace, the accuracy corpus,
the GPTQ calibration file and local task files. A value that names a Hugging Face hub id
is marked ``hub_id``: it is a path only if such a folder exists where the job runs
(transformers and vLLM load an existing local folder before they look at the hub).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.spec.model import ModelSpec

if TYPE_CHECKING:
    from engine.spec.job import JobSpec


# Recipe knobs that name a file or folder (any engine's recipe that has them): Launch notes the allowed folders.
RECIPE_PATH_FIELDS = ("assistant_model", "speculative_model", "gptq_calibration_file")


@dataclass(frozen=True)
class InputPath:
    """One file or folder a job reads: the spec field (as users name it) and its value."""

    field: str
    value: str
    hub_id: bool = False  # a hub id, a local path only when such a folder exists


def _model_source(field: str, source: str | None) -> list[InputPath]:
    """A model source as an input path: local folders and GGUF files; hub ids that may be folders."""
    if not source:
        return []
    try:
        kind = ModelSpec(source=source).kind
    except ValueError:  # not a model source at all: judged as a path (pre-flight says why it cannot load)
        return [InputPath(field, source.strip())]
    if kind in ("local", "gguf"):
        return [InputPath(field, source.strip())]
    if kind == "hf":
        return [InputPath(field, source.strip().removeprefix("hf:"), hub_id=True)]
    return []  # demo, synthetic: nothing the user points at


def input_paths(spec: JobSpec) -> list[InputPath]:
    """Every path ``spec`` makes a job read, in the order a user would list them."""
    out = _model_source("model", spec.model.source)
    recipe = spec.recipe
    out += _model_source("assistant_model", getattr(recipe, "assistant_model", None))
    out += _model_source("speculative_model", getattr(recipe, "speculative_model", None))
    calibration = getattr(recipe, "gptq_calibration_file", None)
    if calibration:
        out.append(InputPath("gptq_calibration_file", calibration))
    traffic = spec.workload.traffic
    path = traffic.input_path()
    if path is not None and traffic.file_field:
        out.append(InputPath(traffic.file_field, path))
    corpus = spec.quality.corpus
    if corpus != "default" and not corpus.startswith("hf:"):
        out.append(InputPath("corpus", corpus))
    out += [InputPath("task", name) for name in spec.quality.tasks if name.endswith((".jsonl", ".yaml", ".yml"))]
    return out
