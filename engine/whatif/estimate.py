"""Pure what-if estimator: latency, throughput and memory fit of a recipe on hardware.

No weights, no torch, no device: the model is its architecture config. The time model
is a roofline with efficiency factors and fixed engine overheads (see :class:`Factors`):

- prefill (TTFT) = prefill overhead + max(FLOPs / (peak x eff_compute_prefill),
  bytes / (bandwidth x eff_bandwidth)) + tensor-parallel communication;
- decode (TPOT) = per-step overhead + max(bytes / (bandwidth x eff_bandwidth),
  FLOPs / (peak x eff_compute_decode)) + communication, where bytes per step are all
  the weights plus the KV cache of the batch read once.

The per-step overhead is what keeps a launch-bound engine (eager transformers, one
kernel launch per op from Python) from being predicted as fast as a fused one.
:mod:`engine.whatif.calibrate` fits the factors from measured runs; without runs the
documented priors below are used and the estimate says "uncalibrated".
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.spec.catalog import SYNTHETIC_ARCHITECTURES, architecture_config, parameter_count
from engine.whatif.hardware import Hardware

GB = 1e9

# Bytes per element of a stored weight / KV entry. int4 is weight-only (group scales ignored).
BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float": "fp32",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
}
WEIGHT_DTYPES: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "fp8", "int8")
# Precision the matmuls run in, per weight format: fp8 and int8 as W8A8, int4 weight-only in bf16.
COMPUTE_PRECISION: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "bf16",
}

MEMORY_HEADROOM = 0.95  # share of the capacity an engine can use (allocator fragmentation, other users)
RUNTIME_OVERHEAD_GB = {"gpu": 1.0, "cpu": 0.5}  # CUDA context + workspaces / Python + torch runtime
INTERCONNECT_EFFICIENCY = 0.7
ALLREDUCE_LATENCY_S = 5e-6


class EstimateError(ValueError):
    """Input the estimator cannot use; the message is one line and says what would work."""


# -- model shape -------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    """What the estimator needs from an architecture config."""

    name: str
    model_type: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    max_positions: int | None
    sliding_window: int | None
    params: int

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection (the embedding when tied): a matmul every token."""
        return self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """Parameters in the per-layer matmuls (attention projections and MLP)."""
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return self.layers * (attn + 3 * self.hidden * self.intermediate)

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


def _count_params(c: dict[str, Any]) -> int:
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or h // heads
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    if c.get("model_type") == "qwen2" or c.get("attention_bias"):
        attn += heads * head_dim + 2 * kv * head_dim
    embed = c["vocab_size"] * h
    head = 0 if c.get("tie_word_embeddings") else embed
    return layers * (attn + 3 * h * inter + 2 * h) + embed + head + h


def shape_from_config(config: dict[str, Any], name: str = "config") -> ModelShape:
    """A :class:`ModelShape` from HF ``config.json`` keys (llama-like decoders)."""
    c = dict(config.get("text_config") or config)
    if c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts"):
        raise EstimateError(f"{name}: mixture-of-experts configs are not supported by the estimator yet")
    missing = [
        k
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        if not isinstance(c.get(k), int) or c.get(k) <= 0
    ]
    if missing:
        raise EstimateError(f"{name}: config lacks {', '.join(missing)} (needs a llama-like decoder config)")
    heads = c["num_attention_heads"]
    head_dim = c.get("head_dim") or c["hidden_size"] // heads
    window = c.get("sliding_window") if c.get("use_sliding_window", True) else None
    return ModelShape(
        name=name,
        model_type=str(c.get("model_type", "llama")),
        layers=c["num_hidden_layers"],
        hidden=c["hidden_size"],
        intermediate=c["intermediate_size"],
        heads=heads,
        kv_heads=c.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        vocab=c["vocab_size"],
        tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_positions=c.get("max_position_embeddings"),
        sliding_window=window if isinstance(window, int) else None,
        params=_count_params(c),
    )


def model_shape(model: str | dict[str, Any]) -> ModelShape:
    """Shape of ``demo``, ``synthetic:<arch>``, a local folder with config.json, or a config dict."""
    if isinstance(model, dict):
        return shape_from_config(model, str(model.get("_name_or_path") or "config"))
    source = model.strip()
    if source == "demo":  # SmolLM2-135M-Instruct: the catalog's smollm2-135m architecture
        shape = shape_from_config(architecture_config("smollm2-135m"), "demo (SmolLM2-135M-Instruct)")
        return replace(shape, params=parameter_count("smollm2-135m"))
    if source.startswith("synthetic:"):
        arch = source.split(":", 1)[1]
        if arch not in SYNTHETIC_ARCHITECTURES:
            raise EstimateError(
                f"unknown architecture {arch!r}; choose one of: {', '.join(sorted(SYNTHETIC_ARCHITECTURES))}"
            )
        return replace(shape_from_config(architecture_config(arch), source), params=parameter_count(arch))
    path = Path(source).expanduser()
    cfg_file = path / "config.json" if path.is_dir() else path
    if cfg_file.name == "config.json" and cfg_file.is_file():
        try:
            data = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise EstimateError(f"cannot read {cfg_file}: {exc}") from exc
        if not isinstance(data, dict):
            raise EstimateError(f"{cfg_file} does not hold a JSON object")
        return shape_from_config(data, source)
    raise EstimateError(
        f"model {source!r} is not 'demo', 'synthetic:<arch>' ({', '.join(sorted(SYNTHETIC_ARCHITECTURES))}) "
        "or a local folder with config.json"
    )


# -- recipe, workload, factors ------------------------------------------------------------
def normalize_dtype(name: str, allowed: tuple[str, ...]) -> str:
    """``bfloat16`` -> ``bf16`` etc.; raises :class:`EstimateError` outside ``allowed``."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in allowed:
        raise EstimateError(f"precision {name!r} is not one of: {', '.join(allowed)}")
    return key


@dataclass(frozen=True)
class EstimateRecipe:
    """How the model is served: engine, weight and KV precision, batch size, tensor parallelism."""

    engine: str = "transformers"
    dtype: str = "auto"
    kv_dtype: str = "auto"
    batch_size: int = 1
    tp: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype, WEIGHT_DTYPES))
        object.__setattr__(self, "kv_dtype", normalize_dtype(self.kv_dtype, KV_DTYPES))
        if not 1 <= self.batch_size <= 4096:
            raise EstimateError(f"batch size {self.batch_size} must be between 1 and 4096")
        if self.tp not in (1, 2, 4, 8, 16):
            raise EstimateError(f"tensor parallelism {self.tp} must be 1, 2, 4, 8 or 16")


@dataclass(frozen=True)
class EstimateWorkload:
    """Prompt and output lengths per request and the requests in flight (default: one batch)."""

    prompt_tokens: int = 128
    output_tokens: int = 32
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.prompt_tokens <= 10_000_000:
            raise EstimateError(f"prompt tokens {self.prompt_tokens} must be between 1 and 10,000,000")
        if not 1 <= self.output_tokens <= 1_000_000:
            raise EstimateError(f"output tokens {self.output_tokens} must be between 1 and 1,000,000")
        if self.concurrency is not None and not 1 <= self.concurrency <= 100_000:
            raise EstimateError(f"concurrency {self.concurrency} must be between 1 and 100,000")


@dataclass(frozen=True)
class Factors:
    """Efficiency factors (shares of peak) and fixed overheads of an engine on a device kind."""

    eff_bandwidth: float
    eff_compute_prefill: float
    eff_compute_decode: float
    step_overhead_ms: float
    prefill_overhead_ms: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# Priors, used until calibration replaces them ("uncalibrated"). The transformers GPU
# overhead is from FIELD-NOTES: eager Llama-3.2-1B on an H200 decoded at ~51 ms/token
# against a 0.58 ms bandwidth floor (launch-bound). "ideal" is the bare roofline.
PRIORS: dict[tuple[str, str], Factors] = {
    ("transformers", "gpu"): Factors(0.7, 0.5, 0.3, 45.0, 45.0),
    ("transformers", "cpu"): Factors(0.5, 0.5, 0.5, 10.0, 10.0),
    ("vllm", "gpu"): Factors(0.8, 0.6, 0.4, 0.5, 2.0),
    ("vllm", "cpu"): Factors(0.5, 0.5, 0.5, 5.0, 5.0),
    ("ideal", "gpu"): Factors(1.0, 1.0, 1.0, 0.0, 0.0),
    ("ideal", "cpu"): Factors(1.0, 1.0, 1.0, 0.0, 0.0),
}
ENGINES: tuple[str, ...] = ("transformers", "vllm", "ideal")


def prior(engine: str, kind: str) -> Factors:
    """The documented prior of an engine on a device kind (transformers' for unknown engines)."""
    return PRIORS.get((engine, kind)) or PRIORS[("transformers", kind)]


# -- work: what the hardware has to do (independent of the factors) ----------------------
@dataclass(frozen=True)
class Work:
    """FLOPs and bytes per GPU for one prefill and one decode step of a batch."""

    prefill_flops: float
    prefill_bytes: float
    decode_flops: float
    decode_bytes: float
    prefill_comm_s: float
    decode_comm_s: float
    peak_flops: float
    bandwidth: float
    compute_precision: str


def resolve_dtypes(recipe: EstimateRecipe, hw: Hardware) -> tuple[str, str]:
    """(weight precision, KV precision) with ``auto`` made concrete for this hardware."""
    weight = recipe.dtype
    if weight == "auto":
        weight = "fp32" if hw.kind == "cpu" else ("bf16" if hw.tflops.get("bf16") else "fp16")
    kv = recipe.kv_dtype
    if kv == "auto":
        kv = weight if weight in ("fp32", "bf16", "fp16") else ("bf16" if hw.kind == "gpu" else "fp32")
    return weight, kv


def _allreduce_s(n_bytes: float, tp: int, hw: Hardware) -> float:
    if tp == 1:
        return 0.0
    link = (hw.interconnect_gbs or 0) * GB * INTERCONNECT_EFFICIENCY
    return 2 * (tp - 1) / tp * n_bytes / link + 2 * (tp - 1) * ALLREDUCE_LATENCY_S


def work(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int, batch: int) -> Work:
    """The FLOPs and bytes of prefill and of an average decode step (context = prompt + output/2)."""
    weight, kv = resolve_dtypes(recipe, hw)
    if recipe.tp > 1 and not hw.interconnect_gbs:
        raise EstimateError(f"{hw.name} has no interconnect figure; tensor parallelism needs one (use tp=1)")
    if recipe.tp > 1 and shape.heads % recipe.tp:
        raise EstimateError(f"{shape.name} has {shape.heads} attention heads, not divisible by tp={recipe.tp}")
    tp = recipe.tp
    peak, used = hw.peak_flops(COMPUTE_PRECISION[weight])
    act_bytes = 4 if weight == "fp32" else 2
    weight_bytes = weights_bytes(shape, weight)
    # The embedding table is only gathered (B rows) unless it is also the output projection.
    streamed_weights = weight_bytes - (0 if shape.tied_embeddings else shape.embed_params * BYTES[weight])
    kv_tok = kv_bytes_per_token_per_gpu(shape, kv, tp)
    attn_dim = shape.heads * shape.head_dim
    window = shape.sliding_window

    p_ctx = min(prompt, window) if window else prompt
    prefill_flops = (
        2 * shape.linear_params * batch * prompt
        + 4 * shape.layers * batch * attn_dim * prompt * (p_ctx + 1) / 2
        + 2 * shape.lm_head_params * batch
    ) / tp
    prefill_bytes = streamed_weights / tp + batch * prompt * kv_tok

    ctx = prompt + output / 2
    d_ctx = min(ctx, window) if window else ctx
    decode_flops = (
        2 * (shape.linear_params + shape.lm_head_params) * batch + 4 * shape.layers * batch * attn_dim * d_ctx
    ) / tp
    decode_bytes = streamed_weights / tp + batch * d_ctx * kv_tok
    per_layer = 2 * shape.layers  # all-reduces after attention and after the MLP
    prefill_comm = per_layer * _allreduce_s(batch * prompt * shape.hidden * act_bytes, tp, hw)
    decode_comm = per_layer * _allreduce_s(batch * shape.hidden * act_bytes, tp, hw)
    return Work(
        prefill_flops,
        prefill_bytes,
        decode_flops,
        decode_bytes,
        prefill_comm,
        decode_comm,
        peak,
        hw.bandwidth_bytes_per_s,
        used,
    )


def phase_times(w: Work, f: Factors) -> tuple[float, float, str, str]:
    """(TTFT s, TPOT s, prefill bound, decode bound) of ``w`` under factors ``f``."""
    p_compute = w.prefill_flops / (w.peak_flops * f.eff_compute_prefill)
    p_memory = w.prefill_bytes / (w.bandwidth * f.eff_bandwidth)
    d_memory = w.decode_bytes / (w.bandwidth * f.eff_bandwidth)
    d_compute = w.decode_flops / (w.peak_flops * f.eff_compute_decode)
    ttft = f.prefill_overhead_ms / 1e3 + max(p_compute, p_memory) + w.prefill_comm_s
    tpot = f.step_overhead_ms / 1e3 + max(d_memory, d_compute) + w.decode_comm_s
    bound_p = "compute" if p_compute >= p_memory else "memory"
    bound_d = "memory" if d_memory >= d_compute else "compute"
    if f.prefill_overhead_ms / 1e3 > max(p_compute, p_memory):
        bound_p = "overhead"
    if f.step_overhead_ms / 1e3 > max(d_memory, d_compute):
        bound_d = "overhead"
    return ttft, tpot, bound_p, bound_d


# -- memory --------------------------------------------------------------------------------
def weights_bytes(shape: ModelShape, weight_dtype: str) -> float:
    """All parameters in the stored precision (quantization scales ignored)."""
    return shape.params * BYTES[weight_dtype]


def kv_bytes_per_token_per_gpu(shape: ModelShape, kv_dtype: str, tp: int = 1) -> float:
    """KV bytes per token on one GPU: heads are split over tp (replicated when kv_heads < tp)."""
    heads_per_gpu = math.ceil(shape.kv_heads / tp)
    return 2 * shape.layers * heads_per_gpu * shape.head_dim * BYTES[kv_dtype]


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU: weights, KV cache, activations (prefill peak), runtime overhead."""

    weights: float
    kv_per_token: float
    kv_total: float
    activations: float
    overhead: float
    capacity: float
    usable: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_total + self.activations + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    def to_dict(self) -> dict[str, float | bool]:
        d: dict[str, float | bool] = asdict(self)
        d.update(total=self.total, fits=self.fits)
        return d


def _act_per_token(shape: ModelShape, weight: str, tp: int) -> float:
    act = 4 if weight == "fp32" else 2
    return (3 * shape.hidden + 2 * shape.intermediate / tp) * act


def memory(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> Memory:
    """Memory per GPU for a batch of ``recipe.batch_size`` sequences of prompt + output tokens.

    Activations are the prefill working set of one layer (hidden states, MLP intermediates)
    plus the float32 logits of the last position; attention scores are not materialized
    (SDPA/flash kernels).
    """
    weight, kv = resolve_dtypes(recipe, hw)
    b, tp = recipe.batch_size, recipe.tp
    ctx = prompt + output
    kv_ctx = min(ctx, shape.sliding_window) if shape.sliding_window else ctx
    kv_tok = kv_bytes_per_token_per_gpu(shape, kv, tp)
    act = b * prompt * _act_per_token(shape, weight, tp) + b * shape.vocab * 4
    return Memory(
        weights=weights_bytes(shape, weight) / tp,
        kv_per_token=kv_tok,
        kv_total=b * kv_ctx * kv_tok,
        activations=act,
        overhead=RUNTIME_OVERHEAD_GB[hw.kind] * GB,
        capacity=hw.memory_bytes,
        usable=hw.memory_bytes * MEMORY_HEADROOM,
    )


def largest_fit(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> tuple[int, int]:
    """(largest batch at this context, largest context at this batch) that fit; 0 when none.

    The context is capped at the model's declared maximum and counts prompt + output tokens.
    """
    mem = memory(shape, hw, replace(recipe, batch_size=1), prompt, output)
    free = mem.usable - mem.weights - mem.overhead
    per_seq = mem.kv_total + mem.activations
    max_batch = max(0, int(free // per_seq)) if per_seq > 0 else 0
    weight, _ = resolve_dtypes(recipe, hw)
    b = recipe.batch_size
    per_token = b * (mem.kv_per_token + _act_per_token(shape, weight, recipe.tp))
    room = free - b * shape.vocab * 4
    max_ctx = max(0, int(room // per_token)) if room > 0 else 0
    if shape.max_positions:
        max_ctx = min(max_ctx, shape.max_positions)
    return max_batch, max_ctx


# -- the estimate ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Band:
    """Error band from leave-one-out predictions of measured runs (relative, in %)."""

    ttft_pct: float
    tpot_pct: float
    ttft_p90_pct: float
    tpot_p90_pct: float
    n_runs: int


@dataclass(frozen=True)
class Estimate:
    """One hardware entry's prediction for a model, recipe and workload."""

    hardware: str
    hardware_name: str
    measured_hardware: bool
    weight_dtype: str
    kv_dtype: str
    compute_precision: str
    ttft_ms: float
    tpot_ms: float
    e2el_ms: float
    output_tokens_per_s: float
    tokens_per_s_per_user: float
    prefill_bound: str
    decode_bound: str
    memory: Memory
    max_batch: int
    max_context: int
    factors: Factors
    calibration: str
    band: Band | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("memory", "factors", "band")}
        d["memory_bytes"] = self.memory.to_dict()
        d["fits"] = self.fits
        d["factors"] = self.factors.to_dict()
        d["band"] = None if self.band is None else asdict(self.band)
        return d


def estimate(
    shape: ModelShape,
    hw: Hardware,
    recipe: EstimateRecipe,
    workload: EstimateWorkload,
    factors: Factors | None = None,
    calibration: str = "uncalibrated",
    band: Band | None = None,
) -> Estimate:
    """Predict TTFT, TPOT, throughput and memory of one recipe on one hardware entry."""
    f = factors or prior(recipe.engine, hw.kind)
    p, o, b = workload.prompt_tokens, workload.output_tokens, recipe.batch_size
    notes: list[str] = []
    if shape.max_positions and p + o > shape.max_positions:
        notes.append(f"prompt + output ({p + o}) exceed the model's context of {shape.max_positions}")
    weight, kv = resolve_dtypes(recipe, hw)
    conc = workload.concurrency or b
    running = min(conc, b)
    w = work(shape, hw, recipe, p, o, running)
    if w.compute_precision != COMPUTE_PRECISION[weight]:
        notes.append(f"{hw.name} has no {COMPUTE_PRECISION[weight]} path; assumed {w.compute_precision} compute")
    ttft_s, tpot_s, bound_p, bound_d = phase_times(w, f)
    e2el_s = ttft_s + (o - 1) * tpot_s
    waves = math.ceil(conc / b)
    wait_s = e2el_s * (waves - 1) / 2  # static batches: a request waits for the batches before it
    mem = memory(shape, hw, recipe, p, o)
    max_batch, max_ctx = largest_fit(shape, hw, recipe, p, o)
    if not mem.fits:
        notes.append(f"does not fit: needs {mem.total / GB:.1f} GB per device, {mem.usable / GB:.1f} GB usable")
    return Estimate(
        hardware=hw.key,
        hardware_name=hw.name,
        measured_hardware=hw.measured,
        weight_dtype=weight,
        kv_dtype=kv,
        compute_precision=w.compute_precision,
        ttft_ms=(ttft_s + wait_s) * 1e3,
        tpot_ms=tpot_s * 1e3,
        e2el_ms=(e2el_s + wait_s) * 1e3,
        output_tokens_per_s=conc * o / (waves * e2el_s),
        tokens_per_s_per_user=1 / tpot_s,
        prefill_bound=bound_p,
        decode_bound=bound_d,
        memory=mem,
        max_batch=max_batch,
        max_context=max_ctx,
        factors=f,
        calibration=calibration,
        band=band,
        notes=notes,
    )
