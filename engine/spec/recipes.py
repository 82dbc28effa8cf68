"""The recipe every engine's recipe derives from: its small interface, and the knob types engines share (pure).

An engine's own recipe class lives in its package (``engine/backends/<engine>/recipe.py``)
and is named by its descriptor (:mod:`engine.spec.descriptor`); :mod:`engine.spec.engines`
turns a spec's ``recipe`` section into the class of the engine it names. Callers ask the
recipe, never its class: :meth:`EngineRecipe.describe`, :meth:`EngineRecipe.job_problems`
and the few others below are all a spec, a form or a job needs to know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from engine.spec.base import _Strict

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from engine.spec.workload import Workload

# Precision of weights and activations, as the engines that run a local model spell it.
DType = Literal["auto", "float32", "bfloat16", "float16"]
# How a recipe that runs the model's own Python code says so, wherever recipes are shown.
REMOTE_CODE_WORDS = "trusts remote code (runs the model's own Python)"
REMOTE_CODE_HELP = (
    "Run Python code shipped with the model (off: built-in architectures only); an operator's choice, shown on the run"
)


class EngineRecipe(_Strict):
    """The knobs of one engine: every field a flat, typed knob with a description, so forms are built generically.

    A subclass declares the field ``engine``, a one-value ``Literal`` with that value as its
    default (declared there, not here, so that each class keeps its own field order), and
    overrides the methods below where its engine has something to say (pure: no environment).
    """

    if TYPE_CHECKING:
        engine: str

    def describe(self) -> str:
        """The recipe in words, naming only the knobs that differ from the defaults."""
        return self.engine

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """What this device kind (``cpu``, ``cuda:N[,M...]``), workload and model kind cannot run with the recipe."""
        return []

    def accuracy_problems(self) -> list[str]:
        """Why the accuracy phase cannot be measured with this recipe (empty: it can)."""
        return []

    def shape_problems(self, config: JSONObject | None, device: str) -> list[str]:
        """What the model's declared config (``config.json``) forbids with this recipe on ``device``."""
        return []

    def context_limit(self) -> int | None:
        """The context a served model is declared to have by the recipe (an endpoint's ``max_model_len``), None: the
        model's own config says (pre-flight and the light plan context take the smaller)."""
        return None

    def world_size(self, device: str) -> int:
        """Processes one run of the recipe needs on ``device`` (tensor-parallel ranks the job launches; else 1)."""
        return 1
