"""One small function per transformers knob: apply it, return what was actually applied.

Model knobs take the loaded model and change it in place (or return the replacement);
generation knobs return keyword arguments for ``model.generate``. Every function
returns a flat ``dict`` that goes into ``LoadReport.applied`` and from there into the
run's provenance, so a run says what really ran, not what was asked for.
Whether a knob can run on a device is decided earlier, in :mod:`engine.backends.transformers.rules`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Protocol

import torch
from torch import nn

from engine.backends.base import Progress
from engine.backends.transformers.recipe import TransformersRecipe
from engine.jsonvalue import JSONObject

Applied = JSONObject


# -- model structure -------------------------------------------------------------------------
def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder's list of layers (``model.model.layers`` for Llama-like models)."""
    inner = getattr(model, "model", model)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(model).__name__} has no decoder layer list (model.model.layers)")
    return layers


def layers_to_drop(total: int, count: int, where: str) -> list[int]:
    """Indices of the ``count`` layers removed from ``total``: from the end, the start, or the middle.

    'middle' keeps the first and the last layer (the ones pruning studies find most important)
    and removes a contiguous block centred in the stack.
    """
    if count <= 0:
        return []
    if count >= total - 1:
        raise ValueError(f"cannot drop {count} of {total} layers; keep at least two")
    if where == "end":
        return list(range(total - count, total))
    if where == "start":
        return list(range(count))
    first = max(1, (total - count) // 2)
    first = min(first, total - 1 - count)
    return list(range(first, first + count))


def apply_drop_layers(model: nn.Module, count: int, where: str) -> Applied:
    """Remove decoder layers, renumber the rest (their KV-cache slots) and fix the config."""
    if count == 0:
        return {}
    layers = decoder_layers(model)
    drop = set(layers_to_drop(len(layers), count, where))
    kept = [layer for i, layer in enumerate(layers) if i not in drop]
    for new_idx, layer in enumerate(kept):
        attn = getattr(layer, "self_attn", None)
        if attn is not None and hasattr(attn, "layer_idx"):
            attn.layer_idx = new_idx
        if hasattr(layer, "layer_idx"):
            layer.layer_idx = new_idx
    inner = getattr(model, "model", model)
    inner.layers = nn.ModuleList(kept)
    cfg = model.config
    layer_types = getattr(cfg, "layer_types", None)
    if isinstance(layer_types, list) and len(layer_types) == len(layers):
        cfg.layer_types = [t for i, t in enumerate(layer_types) if i not in drop]
    cfg.num_hidden_layers = len(kept)
    return {"dropped_layers": sorted(drop), "num_hidden_layers": len(kept)}


def apply_sliding_window(model: nn.Module, window: int | None) -> Applied:
    """Set the attention span of models whose attention honours ``config.sliding_window``."""
    if window is None:
        return {}
    from engine.backends.transformers.rules import SLIDING_WINDOW_MODEL_TYPES

    cfg = model.config
    model_type = getattr(cfg, "model_type", "?")
    if model_type not in SLIDING_WINDOW_MODEL_TYPES:
        supported = ", ".join(sorted(SLIDING_WINDOW_MODEL_TYPES))
        raise ValueError(
            f"{model_type} models have no sliding-window attention in transformers; models that do: {supported}"
        )
    cfg.sliding_window = window
    if hasattr(cfg, "use_sliding_window"):
        cfg.use_sliding_window = True
    if isinstance(getattr(cfg, "layer_types", None), list):
        cfg.layer_types = ["sliding_attention"] * len(cfg.layer_types)
    for layer in decoder_layers(model):
        attn = getattr(layer, "self_attn", None)
        if attn is not None and hasattr(attn, "sliding_window"):
            attn.sliding_window = window
        if hasattr(layer, "attention_type"):
            layer.attention_type = "sliding_attention"
    return {"sliding_window": window}


# -- weight quantization ------------------------------------------------------------------------
def _linear_count(model: nn.Module) -> int:
    return sum(1 for m in model.modules() if isinstance(m, nn.Linear))


class _LibraryNoise(logging.Filter):
    """torchao's import says "Failed to load .../_C_mxfp8...so" for each CUDA-only kernel library a CPU (or
    another GPU) cannot load, and torch warns about its enums: harmless, and it filled the job's log tail."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        return not (text.startswith("Failed to load") or "is now natively supported by torch.compile" in text)


def import_torchao() -> ModuleType:
    """``torchao``, imported without its harmless start-up warnings (:class:`_LibraryNoise`)."""
    noise = _LibraryNoise()
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    for log in loggers:
        log.addFilter(noise)
    try:
        import torchao
    finally:
        for log in loggers:
            log.removeFilter(noise)
    return torchao


def torchao_config(kind: str) -> object:
    """The torchao config object of a ``torchao_*`` quantization knob."""
    import_torchao()
    from torchao import quantization as q

    if kind == "torchao_int8_weight_only":
        return q.Int8WeightOnlyConfig()
    if kind == "torchao_int8_dynamic":
        return q.Int8DynamicActivationInt8WeightConfig()
    if kind == "torchao_int4_weight_only":
        # tinygemm's packed layout: the CUDA int4 kernel that works without extra packages.
        return q.Int4WeightOnlyConfig(group_size=128, int4_packing_format="tile_packed_to_4d")
    if kind == "torchao_float8":
        return q.Float8DynamicActivationFloat8WeightConfig(granularity=q.PerRow())
    raise ValueError(f"not a torchao knob: {kind}")


def apply_torchao(model: nn.Module, kind: str) -> Applied:
    """Quantize every Linear layer except the output head with torchao's ``quantize_``."""
    torchao = import_torchao()
    from torchao.quantization import quantize_

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

    def _filter(module: nn.Module, _fqn: str) -> bool:
        return isinstance(module, nn.Linear) and module is not head

    linears = sum(1 for m in model.modules() if _filter(m, ""))
    quantize_(model, torchao_config(kind), filter_fn=_filter)
    return {"quantization": kind, "quantized_linears": linears, "torchao": torchao.__version__}


def apply_torch_dynamic_int8(model: nn.Module) -> tuple[nn.Module, Applied]:
    """PyTorch's dynamic int8 quantization of Linear layers (CPU, float32); returns the new model."""
    linears = _linear_count(model)
    quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    return quantized, {"quantization": "torch_dynamic_int8", "quantized_linears": linears}


def apply_bnb(model: nn.Module, kind: str, compute_dtype: torch.dtype, device: torch.device) -> Applied:
    """Swap Linear layers (not the head) for bitsandbytes NF4 or int8 layers on ``device`` (CUDA)."""
    import bitsandbytes as bnb

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, nn.Linear) or child is head:
                continue
            weight = child.weight.data.to("cpu")
            has_bias = child.bias is not None
            if kind == "bnb_nf4":
                new = bnb.nn.Linear4bit(
                    child.in_features, child.out_features, bias=has_bias, compute_dtype=compute_dtype, quant_type="nf4"
                )
                new.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4")
            else:
                new = bnb.nn.Linear8bitLt(
                    child.in_features, child.out_features, bias=has_bias, has_fp16_weights=False, threshold=6.0
                )
                new.weight = bnb.nn.Int8Params(weight.to(compute_dtype), requires_grad=False, has_fp16_weights=False)
            if has_bias:
                new.bias = nn.Parameter(child.bias.data.to(compute_dtype), requires_grad=False)
            setattr(parent, name, new.to(device))  # moving to CUDA is what quantizes
            swapped += 1
    return {"quantization": kind, "quantized_linears": swapped, "bitsandbytes": bnb.__version__}


def gptq_cache_key(model_path: str, recipe: TransformersRecipe, calibration_text: str) -> str:
    """Fingerprint of a GPTQ build: the source weights, the GPTQ knobs and the calibration text."""
    data = {
        "model": str(Path(model_path).resolve()) if Path(model_path).exists() else model_path,
        "bits": recipe.gptq_bits,
        "group_size": recipe.gptq_group_size,
        "desc_act": recipe.gptq_desc_act,
        "calibration": hashlib.sha256(calibration_text.encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def calibration_texts(recipe: TransformersRecipe, samples: int = 64, chars: int = 2000) -> list[str]:
    """Calibration samples: the user's file, or the default corpus's calibration part (never
    its evaluation part, which the accuracy phase scores), cut into pieces."""
    if recipe.gptq_calibration_file:
        text = Path(recipe.gptq_calibration_file).expanduser().read_text(encoding="utf-8", errors="replace")
    else:
        from engine.data import corpus

        text = corpus.calibration_part().text
    pieces = [text[i : i + chars] for i in range(0, len(text), chars) if text[i : i + chars].strip()]
    return pieces[:samples] or [text]


def _calibration_source(recipe: TransformersRecipe) -> str:
    from engine.data import corpus

    return corpus.calibration_source(recipe.gptq_calibration_file)


def gptq_folder(
    model_path: str, recipe: TransformersRecipe, cache_dir: Path, device: torch.device, progress: Progress
) -> tuple[Path, Applied]:
    """Build (once) the GPTQ-quantized model through transformers' GPTQConfig and gptqmodel; return its folder."""
    from filelock import FileLock
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPTQConfig

    texts = calibration_texts(recipe)
    key = gptq_cache_key(model_path, recipe, "\n".join(texts))
    target = cache_dir / "gptq" / key
    applied: Applied = {
        "quantization": "gptq",
        "gptq_bits": recipe.gptq_bits,
        "gptq_group_size": recipe.gptq_group_size,
        "gptq_desc_act": recipe.gptq_desc_act,
        "gptq_cache_key": key,
        "gptq_calibration": _calibration_source(recipe),
        "gptq_calibration_samples": len(texts),
    }
    marker = target / ".complete"
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if marker.exists():
            return target, {**applied, "gptq_cached": True}
        progress(f"quantizing with GPTQ int{recipe.gptq_bits} (once; cached as {key})", None)
        tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=recipe.trust_remote_code)
        config = GPTQConfig(
            bits=recipe.gptq_bits,
            dataset=texts,
            tokenizer=tokenizer,
            group_size=recipe.gptq_group_size,
            desc_act=recipe.gptq_desc_act,
        )
        device_map = "cpu" if device.type == "cpu" else str(device)
        model = AutoModelForCausalLM.from_pretrained(
            model_path, quantization_config=config, device_map=device_map, trust_remote_code=recipe.trust_remote_code
        )
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        marker.write_text("ok")
        del model
    return target, {**applied, "gptq_cached": False}


# -- cache, compile, speculation ---------------------------------------------------------------------
def cache_kwargs(
    recipe: TransformersRecipe, device: torch.device, cache_root: Path | None = None
) -> tuple[dict[str, object], Applied]:
    """Generation kwargs for the KV cache and torch.compile knobs."""
    kwargs: dict[str, object] = {}
    applied: Applied = {"cache_implementation": recipe.cache_implementation}
    if recipe.kv_cache_quantization != "none":
        backend, bits = recipe.kv_cache_quantization.split("_int")
        kwargs["cache_implementation"] = "quantized"
        kwargs["cache_config"] = {"backend": backend, "nbits": int(bits)}  # "hqq" | "quanto"
        applied.update(cache_implementation="quantized", kv_cache_quantization=recipe.kv_cache_quantization)
        applied[backend] = _version("optimum-quanto" if backend == "quanto" else "hqq")
        return kwargs, applied
    if recipe.cache_implementation == "static":
        kwargs["cache_implementation"] = "static"
        if recipe.compile:
            from transformers import CompileConfig

            config = CompileConfig(mode=recipe.compile_mode, fullgraph=False)
            config._compile_all_devices = True  # compile on the CPU too when asked
            kwargs["compile_config"] = config
            if cache_root is not None:
                os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_root / "inductor"))
            applied.update(compile=True, compile_mode=recipe.compile_mode)
        else:
            kwargs["disable_compile"] = True  # a static cache alone must not auto-compile on CUDA
            applied["compile"] = False
    else:
        applied["compile"] = False
    return kwargs, applied


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class SpeculationStats:
    """Draft tokens proposed and accepted by the main model, summed over generate() calls."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.proposed = 0
        self.accepted = 0
        self.steps = 0

    def as_dict(self) -> JSONObject:
        rate = self.accepted / self.proposed if self.proposed else None
        return {"proposed": self.proposed, "accepted": self.accepted, "steps": self.steps, "acceptance_rate": rate}


class _CandidateGenerator(Protocol):
    """transformers' candidate generator of speculative decoding, as :func:`instrument_speculation` wraps it."""

    get_candidates: Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
    update_candidate_strategy: Callable[..., None]


def instrument_speculation(model: nn.Module, stats: SpeculationStats) -> None:
    """Count proposed and accepted draft tokens by wrapping the model's candidate generator."""
    original: Callable[..., _CandidateGenerator] = model._get_candidate_generator

    def _wrapped(*args: object, **kwargs: object) -> _CandidateGenerator:
        generator = original(*args, **kwargs)
        get_candidates = generator.get_candidates
        update = generator.update_candidate_strategy

        def _get(input_ids: torch.Tensor, *a: object, **k: object) -> tuple[torch.Tensor, torch.Tensor | None]:
            out = get_candidates(input_ids, *a, **k)
            stats.proposed += int(out[0].shape[1] - input_ids.shape[1])
            stats.steps += 1
            return out

        def _update(input_ids: torch.Tensor, scores: torch.Tensor, num_matches: int, *a: object, **k: object) -> None:
            stats.accepted += int(num_matches)
            return update(input_ids, scores, num_matches, *a, **k)

        generator.get_candidates = _get
        generator.update_candidate_strategy = _update
        return generator

    model._get_candidate_generator = _wrapped


def speculative_kwargs(recipe: TransformersRecipe, assistant: nn.Module | None) -> tuple[dict[str, object], Applied]:
    """Generation kwargs for prompt lookup, an assistant model or self-speculative early exit."""
    k = recipe.num_speculative_tokens
    if recipe.speculative == "prompt_lookup":
        return (
            {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": recipe.prompt_lookup_ngram},
            {
                "speculative": "prompt_lookup",
                "prompt_lookup_ngram": recipe.prompt_lookup_ngram,
                "num_speculative_tokens": k,
            },
        )
    if recipe.speculative == "assistant":
        if assistant is None:
            raise ValueError("speculative=assistant but no assistant model was loaded")
        assistant.generation_config.num_assistant_tokens = k
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        return (
            {"assistant_model": assistant},
            {"speculative": "assistant", "assistant_model": recipe.assistant_model, "num_speculative_tokens": k},
        )
    if recipe.speculative == "early_exit":
        return (
            {"assistant_early_exit": recipe.early_exit_layer, "num_assistant_tokens": k},
            {"speculative": "early_exit", "early_exit_layer": recipe.early_exit_layer, "num_speculative_tokens": k},
        )
    return {}, {}
