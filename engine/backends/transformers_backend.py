"""Hugging Face transformers engine: ``model.generate`` with a streamer that stamps
every decoding step for every row of the batch.

The streamer receives each step's tokens already copied to the host (``.cpu()``
inside ``generate``), so the stamp marks the moment the token exists for a client,
on CUDA as on the CPU. The first ``put`` is the prompt and is not a chunk.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from typing import Any

import torch

from engine.backends.base import BackendError, ChunkSink, GenerationParams, LoadReport, Progress
from engine.models import ResolvedModel
from engine.spec import TransformersRecipe

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class _StampingStreamer:
    """A transformers streamer that forwards every step to a ChunkSink."""

    __slots__ = ("_sink", "_prompt_seen", "_finished", "_eos", "_rows")

    def __init__(self, sink: ChunkSink, rows: int, eos_ids: set[int] | None) -> None:
        self._sink = sink
        self._prompt_seen = False
        self._rows = rows
        self._finished = [False] * rows
        self._eos = eos_ids

    def put(self, value: torch.Tensor) -> None:
        t_ns = time.perf_counter_ns()
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        if value.dim() == 1:  # one token per row
            tokens = value.tolist()
            counts = [1] * len(tokens)
        else:  # assisted decoding: several tokens in one step (batch 1)
            tokens = [row[-1] for row in value.tolist()]
            counts = [value.shape[-1]] * value.shape[0]
        sink = self._sink
        for row in range(self._rows):
            if self._finished[row]:
                continue
            sink.chunk(row, t_ns, counts[row])
            if self._eos is not None and tokens[row] in self._eos:
                self._finished[row] = True

    def end(self) -> None:
        return None


class TransformersBackend:
    """The transformers engine on the CPU or one CUDA device."""

    name = "transformers"

    def __init__(self) -> None:
        self._model: Any = None
        self._tokenizer: Any = None
        self._device = torch.device("cpu")
        self._applied: dict[str, Any] = {}
        self._device_name = ""

    # -- loading -----------------------------------------------------------------
    def load(self, model: ResolvedModel, recipe: TransformersRecipe, device: str, progress: Progress) -> LoadReport:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        self._device = self._torch_device(device)
        dtype = self._resolve_dtype(recipe.dtype)
        attn = "sdpa" if recipe.attn_implementation == "auto" else recipe.attn_implementation
        self._device_name = device_name(self._device)
        start = time.perf_counter()
        try:
            if model.synthetic_config is not None:
                progress("building random weights", None)
                cfg_kwargs = dict(model.synthetic_config)
                config = AutoConfig.for_model(cfg_kwargs.pop("model_type"), **cfg_kwargs)
                config._attn_implementation = attn
                with torch.device(self._device):
                    self._model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)
                self._tokenizer = None
            else:
                progress("loading weights", None)
                self._tokenizer = AutoTokenizer.from_pretrained(model.path, revision=model.spec.revision)
                self._model = AutoModelForCausalLM.from_pretrained(
                    model.path, revision=model.spec.revision, dtype=dtype, attn_implementation=attn
                )
                self._model.to(self._device)
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"out of memory while loading the model on {device}: {exc}") from exc
        except (OSError, ValueError, ImportError) as exc:
            raise BackendError(f"could not load {model.label}: {str(exc).splitlines()[0]}") from exc
        self._model.eval()
        self._sync()
        load_s = time.perf_counter() - start
        gen = self._model.generation_config
        gen.do_sample = False
        gen.temperature = None
        gen.top_p = None
        gen.top_k = None
        if gen.pad_token_id is None:
            eos = gen.eos_token_id
            gen.pad_token_id = (eos[0] if isinstance(eos, list) else eos) if eos is not None else 0
        self._applied = {
            "dtype": str(self._model.dtype).removeprefix("torch."),
            "attn_implementation": self._model.config._attn_implementation,
            "device": str(self._device),
        }
        cfg = self._model.config
        return LoadReport(
            load_s=load_s,
            device_name=self._device_name,
            applied=dict(self._applied),
            parameters=sum(p.numel() for p in self._model.parameters()),
            vocab_size=getattr(cfg, "vocab_size", None),
            context_length=getattr(cfg, "max_position_embeddings", None),
        )

    def _torch_device(self, device: str) -> torch.device:
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

    def _resolve_dtype(self, name: str) -> torch.dtype:
        if name != "auto":
            return _DTYPES[name]
        if self._device.type == "cpu":
            return torch.float32  # bfloat16 is no faster on CPUs without AVX512-BF16
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def _sync(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    # -- running -----------------------------------------------------------------
    def tokenizer(self) -> Any | None:
        return self._tokenizer

    def generate(self, prompts: list[list[int]], params: GenerationParams, sink: ChunkSink) -> int:
        if self._model is None:
            raise BackendError("generate() called before load()")
        input_ids, attention_mask = self._batch_tensors(prompts)
        gen = self._model.generation_config
        eos = gen.eos_token_id
        eos_ids = None if params.ignore_eos or eos is None else set(eos if isinstance(eos, list) else [eos])
        streamer = _StampingStreamer(sink, len(prompts), eos_ids)
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "streamer": streamer,
            "do_sample": False,
        }
        if params.ignore_eos:
            kwargs["min_new_tokens"] = params.max_new_tokens
        self._sync()
        send_ns = time.perf_counter_ns()
        try:
            with torch.inference_mode():
                self._model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"CUDA out of memory during generation: {str(exc).splitlines()[0]}") from exc
        return send_ns

    def _batch_tensors(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(p) for p in prompts)
        pad = self._model.generation_config.pad_token_id or 0
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding keeps the last token aligned
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
        return ids.to(self._device), mask.to(self._device)

    # -- reporting ---------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        import transformers

        return {
            "engine": self.name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": str(self._device),
            "device_name": self._device_name,
            "torch_threads": torch.get_num_threads(),
            "cuda": torch.version.cuda,
            "applied": dict(self._applied),
        }

    def reset_peak_memory(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self._device)

    def peak_memory_bytes(self) -> int | None:
        if self._device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self._device))
        # On the CPU: the process's peak resident set size (Linux reports KiB).
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def unload(self) -> None:
        self._model = None
        self._tokenizer = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- scoring (accuracy phase) --------------------------------------------------
    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[Any]:
        """Teacher-forced log-softmax of every next token: one forward pass per batch.

        Sequences are right-padded (causal attention never looks at the padding);
        log-probabilities are taken in float32 whatever the recipe's dtype.
        """
        from engine.backends.base import TokenScores

        if self._model is None:
            raise BackendError("score() called before load()")
        if not sequences or any(len(seq) < 2 for seq in sequences):
            raise BackendError("score() needs sequences of at least two tokens")
        width = max(len(seq) for seq in sequences)
        pad = self._model.generation_config.pad_token_id or 0
        ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        out: list[TokenScores] = []
        try:
            with torch.inference_mode():
                logits = self._model(input_ids=ids.to(self._device), attention_mask=mask.to(self._device)).logits
                for row, seq in enumerate(sequences):
                    n = len(seq) - 1
                    logp = torch.log_softmax(logits[row, :n].float(), dim=-1)
                    target = ids[row, 1 : n + 1].to(self._device)
                    token_lp = logp.gather(1, target[:, None])[:, 0]
                    top_ids = top_lp = None
                    if top_k > 0:
                        top = torch.topk(logp, min(top_k, logp.shape[-1]), dim=-1)
                        top_ids, top_lp = top.indices.cpu().numpy(), top.values.cpu().numpy()
                    out.append(TokenScores(
                        token_logprobs=token_lp.cpu().numpy(),
                        top_ids=top_ids,
                        top_logprobs=top_lp,
                        full=logp.cpu().numpy() if full else None,
                    ))
                del logits
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"out of memory while scoring: {str(exc).splitlines()[0]}") from exc
        return out


def device_name(device: torch.device) -> str:
    """The device's real name: the GPU's marketing name or the CPU model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
