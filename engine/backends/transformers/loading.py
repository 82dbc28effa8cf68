"""The steps of loading a transformers recipe: device, dtype, weights, quantization, assistant.

Each step is one function; :meth:`TransformersBackend.load` runs them in order (weights,
with a GPTQ build or tensor-parallel shards at load time; then pruning, sliding window,
post-load quantization, the assistant model) inside :func:`load_errors`, which turns the
libraries' exceptions into one-line :class:`BackendError` reasons.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import torch
from torch import nn

from engine.backends.base import BackendError, Progress
from engine.backends.transformers.recipe import TransformersRecipe
from engine.jsonvalue import JSONObject
from engine.weights.models import ResolvedModel

Applied = JSONObject


class GenerationConfig(Protocol):
    """What is set and read of a model's ``generation_config`` (transformers' ``GenerationConfig``)."""

    do_sample: bool
    temperature: float | None
    top_p: float | None
    top_k: int | None
    pad_token_id: int | None
    eos_token_id: int | list[int] | None


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_device(device: str) -> torch.device:
    """The torch device of a spec's device string (the first GPU of a group)."""
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise BackendError(f"device {device} was asked for but CUDA is not available here")
    index = int(device.split(":")[1].split(",")[0])
    # A worker pins CUDA_VISIBLE_DEVICES to the job's GPUs, so they count from 0 there.
    if os.environ.get("LATENCYLAB_PINNED") == "1":
        index = 0
    if index >= torch.cuda.device_count():
        raise BackendError(f"device {device} does not exist; this machine has {torch.cuda.device_count()} GPU(s)")
    return torch.device("cuda", index)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto``: float32 on the CPU (bfloat16 is no faster without AVX512-BF16), bf16/fp16 on CUDA."""
    if name != "auto":
        return _DTYPES[name]
    if device.type == "cpu":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@contextmanager
def load_errors(label: str, recipe: TransformersRecipe, device: str) -> Iterator[None]:
    """Turn out-of-memory and the libraries' load errors into one-line BackendErrors."""
    try:
        yield
    except BackendError:
        raise
    except torch.OutOfMemoryError as exc:
        raise BackendError(f"out of memory while loading the model on {device}: {exc}") from exc
    except (OSError, ValueError, ImportError, NotImplementedError, RuntimeError) as exc:
        raise BackendError(f"could not load {label} with {recipe.describe()}: {str(exc).splitlines()[0]}") from exc


def build_synthetic(
    model: ResolvedModel, recipe: TransformersRecipe, device: torch.device, dtype: torch.dtype, attn: str
) -> nn.Module:
    """Random weights of the model's architecture, built in place on ``device``."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if recipe.tensor_parallel:
        raise BackendError(
            "tensor parallelism shards weights at load time; synthetic weights are built "
            "in place on one device (use a real model)"
        )
    cfg_kwargs = dict(model.synthetic_config or {})
    config = AutoConfig.for_model(cfg_kwargs.pop("model_type"), **cfg_kwargs)
    config._attn_implementation = attn
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)


def check_shapes(model: ResolvedModel, recipe: TransformersRecipe, device: str) -> None:
    """Shape rules against the real config (hub models, GGUF: known only now, before minutes of GPTQ)."""
    from transformers import AutoConfig

    from engine.backends.transformers.rules import shape_problems

    config = AutoConfig.from_pretrained(
        model.path, revision=model.spec.revision, trust_remote_code=recipe.trust_remote_code
    ).to_dict()
    shapes = shape_problems(recipe, config, device)
    if shapes:
        raise BackendError("; ".join(shapes))


def pretrained_source(
    model: ResolvedModel,
    recipe: TransformersRecipe,
    device: str,
    target: torch.device,
    dtype: torch.dtype,
    attn: str,
    progress: Progress,
    set_threads: Callable[[int], None],
) -> tuple[str, dict[str, object], Applied]:
    """Where ``from_pretrained`` loads from and with which arguments: the model, its GPTQ build, TP shards."""
    from engine.backends.transformers import knobs
    from engine.backends.transformers.rules import tensor_parallel_world_size
    from engine.settings import get_settings

    path = str(model.path)
    remote = {"trust_remote_code": recipe.trust_remote_code}  # off unless the recipe says so
    kwargs: dict[str, object] = {"revision": model.spec.revision, "dtype": dtype, "attn_implementation": attn, **remote}
    if recipe.quantization not in ("none", "gptq"):
        # Read the file into memory instead of mapping it: a mapping kept alive by the weights
        # left unquantized (embeddings) would keep every replaced float page resident.
        kwargs["disable_mmap"] = True
    applied: Applied = {}
    if recipe.quantization == "gptq":
        folder, applied = knobs.gptq_folder(path, recipe, get_settings().cache_dir, target, progress)
        path, kwargs = str(folder), {"dtype": dtype, "attn_implementation": attn, "device_map": str(target), **remote}
    if recipe.tensor_parallel:
        from transformers import DistributedConfig

        world = tensor_parallel_world_size(recipe, device)
        kwargs["distributed_config"] = DistributedConfig(tp_plan="auto", tp_size=world)
        applied["tensor_parallel"] = f"tp_plan=auto over {world} ranks"
        if target.type == "cpu":  # the ranks share the cores
            set_threads(recipe.cpu_threads or max(1, (os.cpu_count() or 1) // world))
            applied["threads_per_rank"] = torch.get_num_threads()
    return path, kwargs, applied


def quantize(
    model: nn.Module, recipe: TransformersRecipe, dtype: torch.dtype, device: torch.device, progress: Progress
) -> tuple[nn.Module, Applied]:
    """Apply a post-load weight quantization knob (torchao, torch dynamic int8, bitsandbytes)."""
    from engine.backends.transformers import knobs

    kind = recipe.quantization
    if kind in ("none", "gptq"):
        return model, {}
    progress(f"quantizing weights ({kind})", None)
    if kind.startswith("torchao_"):
        return model, knobs.apply_torchao(model, kind)
    if kind == "torch_dynamic_int8":
        return knobs.apply_torch_dynamic_int8(model)
    if kind.startswith("bnb_"):
        return model, knobs.apply_bnb(model, kind, dtype, device)
    raise BackendError(f"unknown quantization {kind!r}")


def load_assistant(
    recipe: TransformersRecipe, main: nn.Module, device: torch.device, dtype: torch.dtype, attn: str, progress: Progress
) -> nn.Module | None:
    """The draft model for speculative=assistant (same tokenizer), on the same device; else None."""
    if recipe.speculative != "assistant" or not recipe.assistant_model:
        return None
    from transformers import AutoModelForCausalLM

    from engine.spec import ModelSpec, SpecError
    from engine.weights import models

    progress(f"loading the assistant model {recipe.assistant_model}", None)
    try:
        spec = ModelSpec(source=recipe.assistant_model)
        models.check(spec)
        resolved = models.resolve(spec)
    except (SpecError, ValueError) as exc:
        raise BackendError(f"assistant model: {exc}") from exc
    if resolved.path is None:
        raise BackendError("the assistant model must be a real model with the main model's tokenizer")
    assistant = AutoModelForCausalLM.from_pretrained(
        resolved.path, dtype=dtype, attn_implementation=attn, trust_remote_code=recipe.trust_remote_code
    )
    main_vocab = main.config.vocab_size
    if assistant.config.vocab_size != main_vocab:
        raise BackendError(
            f"the assistant's vocabulary ({assistant.config.vocab_size}) differs from the main "
            f"model's ({main_vocab}); it must share the tokenizer"
        )
    return assistant.to(device).eval()


def greedy(generation_config: GenerationConfig) -> None:
    """Greedy decoding with a pad token (the model's EOS when it has none)."""
    gen = generation_config
    gen.do_sample = False
    gen.temperature = None
    gen.top_p = None
    gen.top_k = None
    if gen.pad_token_id is None:
        eos = gen.eos_token_id
        gen.pad_token_id = (eos[0] if isinstance(eos, list) else eos) if eos is not None else 0
