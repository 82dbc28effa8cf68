"""The simulated server a job's recipe makes on a hardware entry: its scheduler knobs, KV space and precisions.

Each engine's recipe is read in its what-if family's terms (an engine's descriptor names its family;
``vllm`` and ``vllm-server`` share one): the weight and KV precisions and the quantization method as
the static estimator reads them (:func:`engine.whatif.admit.family_terms`), then the knobs the
serving simulator models.

- **vllm**: ``max_num_seqs`` and ``max_num_batched_tokens`` as set, else vLLM 0.32's defaults
  (``EngineArgs.get_batch_defaults``: the API server on a CPU 2,048 tokens and 128 sequences per
  tensor-parallel rank, on a GPU of 70 GB or more (not an A100) 8,192 and 1,024, 160 GB or more
  16,384 and 1,024, other GPUs 2,048 and 256; vLLM in the job's process 2,048 and 128); chunked
  prefill and prefix caching on unless switched off (vLLM v1); the block size as set, else 128 on a
  CPU and 16 on a GPU (vLLM's CPU platform and cache defaults); the KV space of the CPU
  (``cpu_kvcache_space_gib`` GiB, ``VLLM_CPU_KVCACHE_SPACE``), or ``gpu_memory_utilization`` of a
  GPU's memory less weights, activations and runtime; speculative decoding's proposed tokens and an
  acceptance rate (measured runs' ``spec_decode`` acceptance where a calibration has it, else 0); the
  managed server's ``--num-gpu-blocks-override`` and ``--kv-cache-memory-bytes`` where its ``extra_args``
  set them.
- **transformers**: one static batch at a time (``ServerConfig.static``): the workload's batch size
  under static batches, one request at a time under an arrival process or a trace (each request is
  its own ``generate``); the model's cache grows as needed, so its space is the device's memory less
  the weights and runtime. ``generate`` blocks the job's event loop, so a request counts as sent when
  its batch starts (``blocking_client``), as the measured records stamp it.

Pure: no storage, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.spec import JobSpec, engines
from engine.spec.descriptor import ServingModel
from engine.whatif.admit import RunRecipe, family_terms
from engine.whatif.hardware import Hardware
from engine.whatif.memory import RUNTIME_OVERHEAD_GB, weights_bytes
from engine.whatif.serving import Precisions, Served, ServerConfig
from engine.whatif.shapes import ModelShape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping
    from engine.spec.recipes import EngineRecipe

GIB = 1024**3
CPU_BLOCK_SIZE, GPU_BLOCK_SIZE = 128, 16


class NotModelled(ValueError):
    """The recipe or engine is not one the serving simulator models; the message is one line saying why."""


@dataclass(frozen=True)
class Terms:
    """A recipe in the terms calibrations are grouped by: family, precisions, method, speculative decoding."""

    family: str
    weight: str
    kv: str
    method: str = ""
    speculative: str = "none"

    @property
    def words(self) -> str:
        """e.g. ``vllm fp32`` or ``vllm bf16, kv fp8 (fp8), ngram speculative decoding``."""
        text = f"{self.family} {self.weight}" + (f", kv {self.kv}" if self.kv != self.weight else "")
        text += f" ({self.method})" if self.method else ""
        return text + (f", {self.speculative} speculative decoding" if self.speculative != "none" else "")


@dataclass(frozen=True)
class Deployment:
    """What is simulated: the server's configuration, what it serves on which hardware, in which terms."""

    terms: Terms
    config: ServerConfig
    served: Served
    blocking_client: bool = False  # transformers: a request counts as sent when its batch starts

    @property
    def tp(self) -> int:
        return self.config.tensor_parallel


def serving_model(family: str) -> ServingModel | None:
    """How the serving simulator models a what-if family: the first registered engine of it that declares one."""
    return next(
        (d.whatif.serving for d in engines.all_engines() if d.whatif.family == family and d.whatif.serving), None
    )


def modelled_families() -> tuple[str, ...]:
    """The what-if families the serving simulator models (their engines' descriptors say how)."""
    return tuple(dict.fromkeys(d.whatif.family for d in engines.all_engines() if d.whatif.serving is not None))


def family_of(engine: str) -> str:
    """The what-if family of a registered engine; :class:`NotModelled` for the others."""
    descriptor = engines.find(engine)
    family = descriptor.whatif.family if descriptor is not None else engine
    if descriptor is None or descriptor.whatif.serving is None:
        raise NotModelled(
            f"engine {engine}: the serving simulator models the {' and '.join(modelled_families())} engines, "
            f"not {family}"
        )
    return family


def recipe_terms(recipe: JSONMapping, kind: str, applied: JSONMapping | None = None) -> Terms:
    """A recipe (its dict) in calibration terms on a device of ``kind``; :class:`NotModelled` with the reason."""
    family = family_of(str(recipe.get("engine", engines.default().name)))
    model = serving_model(family)
    assert model is not None  # family_of refused the others
    knob = model.speculative_knob
    speculative = str(recipe.get(knob, "none")) if knob else "none"
    plain = {**recipe, **({knob: "none"} if knob else {}), **({model.tp_knob: 1} if model.tp_knob else {})}
    terms = family_terms(family, plain, {"applied": applied or {}}, kind)
    if isinstance(terms, str):
        raise NotModelled(terms)
    for name, value in model.modelled.items():
        if plain.get(name, value) != value:
            raise NotModelled(f"{family} with {name}={plain.get(name)} (not modelled: {name}={value} is)")
    return _terms(family, terms, speculative)


def _terms(family: str, run: RunRecipe, speculative: str) -> Terms:
    if run.drop_layers:
        raise NotModelled("dropped layers (not modelled by the serving simulator)")
    return Terms(family, run.weight, run.kv, run.method, speculative)


def vllm_batch_defaults(hardware: Hardware, server: bool, tp: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.32 picks when the recipe leaves them unset."""
    if not server:
        return 2048, 128
    if hardware.kind == "cpu":
        return 2048 * tp, 128 * tp
    if hardware.memory_gb >= 160 * GIB / 1e9:
        return 16384, 1024
    if hardware.memory_gb >= 70 * GIB / 1e9 and "a100" not in hardware.name.lower():
        return 8192, 1024
    return 2048, 256


def server_flags(recipe: EngineRecipe) -> dict[str, str]:
    """The managed server's ``extra_args`` as ``{flag: value}`` (flags without a value map to "")."""
    argv = recipe.extra_argv() if hasattr(recipe, "extra_argv") else []
    out: dict[str, str] = {}
    for i, token in enumerate(argv):
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[name] = value if eq else ("" if nxt.startswith("--") else nxt)
    return out


def _number(text: str | None) -> float | None:
    """A flag's plain number (``1e9``, ``4000000000``); None for none or another spelling (``4G``)."""
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _vllm_config(spec: JobSpec, hardware: Hardware, tp: int, acceptance: float) -> ServerConfig:
    r = spec.recipe
    flags = server_flags(r)
    blocks = flags.get("--num-gpu-blocks-override")
    kv_bytes = flags.get("--kv-cache-memory-bytes")
    tokens, seqs = vllm_batch_defaults(hardware, spec.recipe.engine == "vllm-server", tp)
    cpu = hardware.kind == "cpu"
    speculating = r.speculative != "none"
    return ServerConfig(
        max_num_seqs=r.max_num_seqs or seqs,
        max_num_batched_tokens=r.max_num_batched_tokens or tokens,
        chunked_prefill=r.enable_chunked_prefill != "off",
        block_size=r.block_size or (CPU_BLOCK_SIZE if cpu else GPU_BLOCK_SIZE),
        prefix_caching=r.enable_prefix_caching != "off",
        gpu_memory_utilization=r.gpu_memory_utilization,
        num_blocks=int(blocks) if blocks else None,
        kv_cache_bytes=_number(kv_bytes) or (r.cpu_kvcache_space_gib * GIB if cpu else None),
        tensor_parallel=tp,
        spec_tokens=r.num_speculative_tokens if speculating else 0,
        spec_acceptance=acceptance if speculating else 0.0,
    )


def _static_config(spec: JobSpec, served: Served) -> ServerConfig:
    wl = spec.workload
    batch = wl.batch_size if wl.arrival == "batch" and not wl.traffic.scheduled else 1
    hw = served.hardware
    room = (
        hw.memory_bytes * 0.9
        - weights_bytes(served.shape, served.precisions.weight)
        - RUNTIME_OVERHEAD_GB[hw.kind] * 1e9
    )
    return ServerConfig.static(batch, block_size=GPU_BLOCK_SIZE, kv_cache_bytes=max(room, 1.0))


def deployment(
    spec: JobSpec,
    hardware: Hardware,
    shape: ModelShape,
    tp: int | None = None,
    acceptance: float = 0.0,
    applied: JSONMapping | None = None,
) -> Deployment:
    """The simulated server of ``spec`` on ``hardware`` at tensor parallel ``tp`` (default: the recipe's);
    :class:`NotModelled` or :class:`~engine.whatif.serving.ConfigError` in one line when it cannot be."""
    recipe = spec.recipe.model_dump()
    terms = recipe_terms(recipe, hardware.kind, applied)
    precisions = Precisions.resolve(hardware, terms.weight, terms.kv)
    served = Served(hardware, shape, precisions)
    model = serving_model(terms.family)
    if model is not None and model.batching == "static":
        if (tp or 1) > 1:
            raise NotModelled(f"tensor parallelism of the {terms.family} engine (not modelled)")
        return Deployment(terms, _static_config(spec, served), served, blocking_client=True)
    tp = tp or int(recipe.get(model.tp_knob, 1) or 1) if model is not None and model.tp_knob else (tp or 1)
    return Deployment(terms, _vllm_config(spec, hardware, tp, acceptance), served)


def with_acceptance(dep: Deployment, acceptance: float) -> Deployment:
    """The same deployment with another speculative acceptance rate (no change without speculation)."""
    if not dep.config.spec_tokens:
        return dep
    return replace(dep, config=replace(dep.config, spec_acceptance=acceptance))
