"""Hugging Face transformers engine: ``model.generate`` with a streamer that stamps
every decoding step for every row of the batch.

The streamer receives each step's tokens already copied to the host (``.cpu()``
inside ``generate``), so the stamp marks the moment the token exists for a client,
on CUDA as on the CPU. The first ``put`` is the prompt and is not a chunk.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

import torch

from engine.backends.base import BackendError, ChunkSink, GenerationParams, LoadReport, Progress
from engine.spec import TransformersRecipe
from engine.weights.models import ResolvedModel

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
        self._recipe: TransformersRecipe | None = None
        self._threads_before: int | None = None
        self._gen_kwargs: dict[str, Any] = {}
        self._assistant: Any = None
        self._cb_manager: Any = None
        self._cb_calls = 0
        from engine.backends.transformers.knobs import SpeculationStats

        self._spec_stats = SpeculationStats()

    # -- loading -----------------------------------------------------------------
    def load(self, model: ResolvedModel, recipe: TransformersRecipe, device: str, progress: Progress) -> LoadReport:
        """Load the weights and apply the recipe's knobs, each by one function of :mod:`engine.backends.transformers.knobs`.

        Order: weights (GPTQ build or tensor-parallel shards at load time), pruning, sliding
        window, post-load quantization, then the generation knobs (cache, compile,
        speculation, batching). ``LoadReport.applied`` lists what each knob really did.
        """
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from engine.backends.transformers import knobs
        from engine.settings import get_settings

        self._recipe = recipe
        self._device = self._torch_device(device)
        dtype = self._resolve_dtype(recipe.dtype)
        attn = "sdpa" if recipe.attn_implementation == "auto" else recipe.attn_implementation
        self._device_name = device_name(self._device)
        applied: dict[str, Any] = {}
        if recipe.cpu_threads is not None and self._device.type == "cpu":
            self._set_threads(recipe.cpu_threads)
            applied["cpu_threads"] = torch.get_num_threads()
        start = time.perf_counter()
        try:
            if model.synthetic_config is not None:
                if recipe.tensor_parallel:
                    raise BackendError(
                        "tensor parallelism shards weights at load time; synthetic weights are built "
                        "in place on one device (use a real model)"
                    )
                progress("building random weights", None)
                cfg_kwargs = dict(model.synthetic_config)
                config = AutoConfig.for_model(cfg_kwargs.pop("model_type"), **cfg_kwargs)
                config._attn_implementation = attn
                with torch.device(self._device):
                    self._model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)
                self._tokenizer = None
            else:
                progress("loading weights", None)
                path = model.path
                assert path is not None
                self._tokenizer = AutoTokenizer.from_pretrained(path, revision=model.spec.revision)
                load_kwargs: dict[str, Any] = {
                    "revision": model.spec.revision,
                    "dtype": dtype,
                    "attn_implementation": attn,
                }
                from engine.spec.rules import shape_problems, tensor_parallel_world_size

                shapes = shape_problems(
                    recipe, AutoConfig.from_pretrained(path, revision=model.spec.revision).to_dict(), device
                )
                if shapes:  # hub models and GGUF files: known only now, before minutes of GPTQ
                    raise BackendError("; ".join(shapes))
                if recipe.quantization == "gptq":
                    folder, gptq_applied = knobs.gptq_folder(
                        path, recipe, get_settings().cache_dir, self._device, progress
                    )
                    applied.update(gptq_applied)
                    path, load_kwargs = (
                        str(folder),
                        {"dtype": dtype, "attn_implementation": attn, "device_map": str(self._device)},
                    )
                if recipe.tensor_parallel:
                    world = tensor_parallel_world_size(recipe, device)
                    from transformers import DistributedConfig

                    load_kwargs["distributed_config"] = DistributedConfig(tp_plan="auto", tp_size=world)
                    applied["tensor_parallel"] = f"tp_plan=auto over {world} ranks"
                    if self._device.type == "cpu":  # the ranks share the cores
                        self._set_threads(recipe.cpu_threads or max(1, (os.cpu_count() or 1) // world))
                        applied["threads_per_rank"] = torch.get_num_threads()
                self._model = AutoModelForCausalLM.from_pretrained(path, **load_kwargs)
                if recipe.tensor_parallel:  # each rank holds its shard (its own GPU, or the CPU)
                    self._device = self._model.device
                elif recipe.quantization != "gptq":
                    self._model.to(self._device)
            applied.update(knobs.apply_drop_layers(self._model, recipe.drop_layers, recipe.drop_layers_from))
            applied.update(knobs.apply_sliding_window(self._model, recipe.sliding_window))
            applied.update(self._quantize(recipe, dtype, progress))
            self._assistant = self._load_assistant(recipe, dtype, attn, progress)
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"out of memory while loading the model on {device}: {exc}") from exc
        except (OSError, ValueError, ImportError, NotImplementedError, RuntimeError) as exc:
            if isinstance(exc, BackendError):
                raise
            raise BackendError(
                f"could not load {model.label} with {recipe.describe()}: {str(exc).splitlines()[0]}"
            ) from exc
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
        cache_kwargs, cache_applied = knobs.cache_kwargs(recipe, self._device, get_settings().cache_dir)
        spec_kwargs, spec_applied = knobs.speculative_kwargs(recipe, self._assistant)
        self._gen_kwargs = {**cache_kwargs, **spec_kwargs}
        if recipe.speculative != "none":
            knobs.instrument_speculation(self._model, self._spec_stats)
        self._applied = {
            "dtype": str(self._model.dtype).removeprefix("torch."),
            "attn_implementation": self._model.config._attn_implementation,
            "device": str(self._device),
            "quantization": "none",
            **applied,
            **cache_applied,
            **spec_applied,
            "batching": recipe.batching,
            "recipe": recipe.describe(),
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

    def _quantize(self, recipe: TransformersRecipe, dtype: torch.dtype, progress: Progress) -> dict[str, Any]:
        """Apply a post-load weight quantization knob (torchao, torch dynamic int8, bitsandbytes)."""
        from engine.backends.transformers import knobs

        kind = recipe.quantization
        if kind in ("none", "gptq"):
            return {}
        progress(f"quantizing weights ({kind})", None)
        if kind.startswith("torchao_"):
            return knobs.apply_torchao(self._model, kind)
        if kind == "torch_dynamic_int8":
            self._model, applied = knobs.apply_torch_dynamic_int8(self._model)
            return applied
        if kind.startswith("bnb_"):
            return knobs.apply_bnb(self._model, kind, dtype, self._device)
        raise BackendError(f"unknown quantization {kind!r}")

    def _load_assistant(self, recipe: TransformersRecipe, dtype: torch.dtype, attn: str, progress: Progress) -> Any:
        """The draft model for speculative=assistant (same tokenizer), on the same device."""
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
        assistant = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=dtype, attn_implementation=attn)
        main_vocab = self._model.config.vocab_size
        if assistant.config.vocab_size != main_vocab:
            raise BackendError(
                f"the assistant's vocabulary ({assistant.config.vocab_size}) differs from the main "
                f"model's ({main_vocab}); it must share the tokenizer"
            )
        return assistant.to(self._device).eval()

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
        """Generate for one batch with the recipe's generation knobs; returns the send stamp."""
        if self._model is None:
            raise BackendError("generate() called before load()")
        if self._recipe is not None and self._recipe.batching == "continuous":
            return self._generate_continuous(prompts, params, sink)
        input_ids, attention_mask = self._batch_tensors(prompts)
        gen = self._model.generation_config
        eos = gen.eos_token_id
        eos_ids = None if params.ignore_eos or eos is None else set(eos if isinstance(eos, list) else [eos])
        streamer = _StampingStreamer(sink, len(prompts), eos_ids)
        kwargs: dict[str, Any] = {
            **self._gen_kwargs,
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

    def _generate_continuous(self, prompts: list[list[int]], params: GenerationParams, sink: ChunkSink) -> int:
        """Submit the batch to transformers' continuous-batching manager and stamp streamed tokens."""
        if self._cb_manager is None:  # sized on the first (warm-up) batch, which has the measured shapes
            from transformers import ContinuousBatchingConfig

            page = 64
            longest = max(len(p) for p in prompts) + params.max_new_tokens
            per_request = -(-longest // page)
            on_cuda = self._device.type == "cuda"
            config = ContinuousBatchingConfig(
                page_size=page,
                num_blocks=per_request * len(prompts) + len(prompts),
                max_batch_tokens=max(256, min(8192, sum(len(p) for p in prompts))),
                max_requests_per_batch=len(prompts),
                use_cuda_graph=None if on_cuda else False,
                auto_switch_to_flash=on_cuda,
            )
            self._cb_manager = self._model.init_continuous_batching(
                generation_config=self._model.generation_config, continuous_batching_config=config
            )
            self._cb_manager.start()
            self._applied["attn_implementation"] = self._model.config._attn_implementation
            self._applied["continuous_batching"] = {
                "page_size": page,
                "num_blocks": config.num_blocks,
                "max_batch_tokens": config.max_batch_tokens,
            }
        manager = self._cb_manager
        self._cb_calls += 1
        rows = {f"c{self._cb_calls}_{i}": i for i in range(len(prompts))}
        seen = [0] * len(prompts)
        eos = -1 if params.ignore_eos else None
        send_ns = time.perf_counter_ns()
        for rid, row in rows.items():
            manager.add_request(
                prompts[row], request_id=rid, max_new_tokens=params.max_new_tokens, streaming=True, eos_token_id=eos
            )
        pending = set(rows)
        deadline = time.monotonic() + 600.0
        while pending:
            out = manager.get_result(timeout=0.5)
            t_ns = time.perf_counter_ns()
            if out is None:
                if not manager.is_running() or time.monotonic() > deadline:
                    raise BackendError("continuous batching stopped before every request finished")
                continue
            row = rows.get(out.request_id)
            if row is None:
                continue
            if out.error:
                raise BackendError(f"continuous batching: {out.error}")
            n = len(out.generated_tokens)
            if n > seen[row]:
                sink.chunk(row, t_ns, n - seen[row])
                seen[row] = n
            if out.is_finished():
                pending.discard(out.request_id)
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
            **({"speculation": self._spec_stats.as_dict()} if self._applied.get("speculative") else {}),
        }

    def reset_peak_memory(self) -> None:
        """Called as the measured phase starts: also restarts the speculation counters (warm-up excluded)."""
        self._spec_stats.reset()
        if self._device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self._device)

    def peak_memory_bytes(self) -> int | None:
        if self._device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self._device))
        # On the CPU: the process's peak resident set size (Linux reports KiB).
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def _set_threads(self, n: int) -> None:
        """torch's intra-op threads for this run; unload() puts the process's count back."""
        if self._threads_before is None:
            self._threads_before = torch.get_num_threads()
        torch.set_num_threads(n)

    def unload(self) -> None:
        if self._cb_manager is not None:
            try:
                self._cb_manager.stop(block=True, timeout=10)
            finally:
                self._cb_manager = None
        self._assistant = None
        self._model = None
        self._tokenizer = None
        if self._recipe is not None and self._recipe.tensor_parallel and torch.distributed.is_initialized():
            # this run's ranks are gone after it; a later run in the same process starts a new group
            torch.distributed.destroy_process_group()
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
            self._threads_before = None
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
                    out.append(
                        TokenScores(
                            token_logprobs=token_lp.cpu().numpy(),
                            top_ids=top_ids,
                            top_logprobs=top_lp,
                            full=logp.cpu().numpy() if full else None,
                        )
                    )
                del logits
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"out of memory while scoring: {str(exc).splitlines()[0]}") from exc
        return out


def device_name(device: torch.device) -> str:
    """The device's real name: the GPU's marketing name or the CPU model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from engine.measure.provenance import cpu_model

    return cpu_model()
