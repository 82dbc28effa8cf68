"""Hugging Face transformers engine: ``model.generate`` with a streamer that stamps
every decoding step for every row of the batch (:mod:`.streaming`), loaded step by step
(:mod:`.loading`), knobs applied by :mod:`.knobs`.

Behind the one streaming contract (:class:`engine.backends.base.Backend`): ``stream`` runs a
batch through ``model.generate`` on the backend's loop without yielding, so a second request
waits until the batch in flight is done (in-process transformers serves one batch at a time).
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Sequence
from typing import TypeVar

import torch
from torch import nn

from engine.backends.asyncloop import EventLoop
from engine.backends.base import (
    Backend,
    BackendError,
    LoadReport,
    Progress,
    Request,
    Tokenizer,
    TokenScores,
    stamp_chunks,
)
from engine.backends.transformers import loading
from engine.backends.transformers.memory import weights_memory_bytes
from engine.backends.transformers.recipe import TransformersRecipe
from engine.backends.transformers.streaming import (
    Chunk,
    ContinuousManager,
    StampingStreamer,
    continuous_manager,
    stream_continuous,
)
from engine.jsonvalue import JSONObject
from engine.measure.memory import CUDA_KIND
from engine.measure.records import RequestRecord
from engine.weights.models import ResolvedModel

T = TypeVar("T")


class TransformersBackend(Backend):
    """The transformers engine on the CPU or one CUDA device."""

    name = "transformers"

    def __init__(self) -> None:
        self._loop = EventLoop()
        self._model: nn.Module | None = None
        self._tokenizer: Tokenizer | None = None
        self._device = torch.device("cpu")
        self._applied: JSONObject = {}
        self._device_name = ""
        self._recipe: TransformersRecipe | None = None
        self._threads_before: int | None = None
        self._gen_kwargs: dict[str, object] = {}
        self._assistant: nn.Module | None = None
        self._cb_manager: ContinuousManager | None = None
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
        from engine.backends.transformers import knobs

        self._recipe = recipe
        self._device = loading.torch_device(device)
        dtype = loading.resolve_dtype(recipe.dtype, self._device)
        attn = "sdpa" if recipe.attn_implementation == "auto" else recipe.attn_implementation
        self._device_name = device_name(self._device)
        applied: JSONObject = {}
        if recipe.cpu_threads is not None and self._device.type == "cpu":
            self._set_threads(recipe.cpu_threads)
            applied["cpu_threads"] = torch.get_num_threads()
        start = time.perf_counter()
        with loading.load_errors(model.label, recipe, device):
            applied.update(self._load_weights(model, recipe, device, dtype, attn, progress))
            applied.update(knobs.apply_drop_layers(self._model, recipe.drop_layers, recipe.drop_layers_from))
            applied.update(knobs.apply_sliding_window(self._model, recipe.sliding_window))
            self._model, quantized = loading.quantize(self._model, recipe, dtype, self._device, progress)
            applied.update(quantized)
            self._assistant = loading.load_assistant(recipe, self._model, self._device, dtype, attn, progress)
        self._model.eval()
        self._sync()
        self._loop.open()
        load_s = time.perf_counter() - start
        loading.greedy(self._model.generation_config)
        self._applied = {
            "dtype": str(self._model.dtype).removeprefix("torch."),
            "attn_implementation": self._model.config._attn_implementation,
            "device": str(self._device),
            "quantization": "none",
            **applied,
            **self._generation_knobs(recipe),
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
            weights_memory_bytes=weights_memory_bytes(self._model, self._assistant),
        )

    def _load_weights(
        self,
        model: ResolvedModel,
        recipe: TransformersRecipe,
        device: str,
        dtype: torch.dtype,
        attn: str,
        progress: Progress,
    ) -> JSONObject:
        """Random weights, or the model (its GPTQ build, its tensor-parallel shard) with its tokenizer."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if model.synthetic_config is not None:
            progress("building random weights", None)
            self._model = loading.build_synthetic(model, recipe, self._device, dtype, attn)
            self._tokenizer = None
            return {}
        progress("loading weights", None)
        assert model.path is not None
        self._tokenizer = AutoTokenizer.from_pretrained(
            model.path, revision=model.spec.revision, trust_remote_code=recipe.trust_remote_code
        )
        loading.check_shapes(model, recipe, device)
        path, kwargs, applied = loading.pretrained_source(
            model, recipe, device, self._device, dtype, attn, progress, self._set_threads
        )
        self._model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        if recipe.tensor_parallel:  # each rank holds its shard (its own GPU, or the CPU)
            self._device = self._model.device
        elif recipe.quantization != "gptq":
            self._model.to(self._device)
        return applied

    def _generation_knobs(self, recipe: TransformersRecipe) -> JSONObject:
        """The cache, compile and speculation knobs as ``generate`` kwargs; returns what they applied."""
        from engine.backends.transformers import knobs
        from engine.settings import get_settings

        cache_kwargs, cache_applied = knobs.cache_kwargs(recipe, self._device, get_settings().cache_dir)
        spec_kwargs, spec_applied = knobs.speculative_kwargs(recipe, self._assistant)
        self._gen_kwargs = {**cache_kwargs, **spec_kwargs}
        if recipe.speculative != "none":
            knobs.instrument_speculation(self._model, self._spec_stats)
        return {**cache_applied, **spec_applied}

    def _sync(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    # -- running -----------------------------------------------------------------
    def tokenizer(self) -> Tokenizer | None:
        return self._tokenizer

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run a coroutine (the load driver's phase) on this backend's loop."""
        return self._loop.run(coro)

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        """Generate one batch in one ``model.generate`` (blocking the loop); chunks go to the records."""
        texts: list[list[int]] | None = [[] for _ in batch] if any(r.want_text for r in batch) else None
        send_ns = self.generate_batch(
            [r.prompt for r in batch],
            [r.max_new_tokens for r in batch],
            all(r.ignore_eos for r in batch),
            stamp_chunks(records),
            texts,
        )
        for i, rec in enumerate(records):
            rec.send_ns = send_ns
            if texts is not None and batch[i].want_text and self._tokenizer is not None:
                rec.text = self._tokenizer.decode(texts[i], skip_special_tokens=True)

    def generate_batch(
        self,
        prompts: list[list[int]],
        max_new_tokens: Sequence[int],
        ignore_eos: bool,
        chunk: Chunk,
        texts: list[list[int]] | None = None,
    ) -> int:
        """Generate for one batch with the recipe's generation knobs; returns the send stamp.

        Each row ends after its own ``max_new_tokens`` (the batch runs to the longest);
        ``texts`` (a list per row), when given, receives the rows' new token ids."""
        if self._model is None:
            raise BackendError("generate() called before load()")
        if self._recipe is not None and self._recipe.batching == "continuous":
            return self._generate_continuous(prompts, max_new_tokens, ignore_eos, chunk, texts)
        input_ids, attention_mask = self._batch_tensors(prompts)
        gen = self._model.generation_config
        eos = gen.eos_token_id
        eos_ids = None if ignore_eos or eos is None else set(eos if isinstance(eos, list) else [eos])
        longest = max(max_new_tokens)
        uniform = all(n == longest for n in max_new_tokens)
        streamer = StampingStreamer(
            chunk, len(prompts), eos_ids, None if uniform else max_new_tokens, texts is not None
        )
        kwargs: dict[str, object] = {
            **self._gen_kwargs,
            "max_new_tokens": longest,
            "streamer": streamer,
            "do_sample": False,
        }
        if ignore_eos:
            kwargs["min_new_tokens"] = longest
        self._sync()
        send_ns = time.perf_counter_ns()
        try:
            with torch.inference_mode():
                self._model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        except torch.OutOfMemoryError as exc:
            raise BackendError(f"CUDA out of memory during generation: {str(exc).splitlines()[0]}") from exc
        if texts is not None and streamer.ids is not None:
            for row, ids in enumerate(streamer.ids):
                texts[row].extend(ids)
        return send_ns

    def _generate_continuous(
        self,
        prompts: list[list[int]],
        max_new_tokens: Sequence[int],
        ignore_eos: bool,
        chunk: Chunk,
        texts: list[list[int]] | None,
    ) -> int:
        """Submit the batch to transformers' continuous-batching manager and stamp streamed tokens."""
        if self._cb_manager is None:
            self._cb_manager, sizes = continuous_manager(
                self._model, prompts, max(max_new_tokens), self._device.type == "cuda"
            )
            self._applied["attn_implementation"] = self._model.config._attn_implementation
            self._applied["continuous_batching"] = sizes
        self._cb_calls += 1
        return stream_continuous(self._cb_manager, prompts, max_new_tokens, ignore_eos, chunk, self._cb_calls, texts)

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
    def info(self) -> JSONObject:
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

    def measuring_started(self) -> None:
        """The measured phase starts: restart the speculation counters and CUDA's peak (warm-up excluded)."""
        self._spec_stats.reset()
        if self._device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self._device)

    def peak_memory(self) -> tuple[int | None, str] | None:
        """CUDA's max allocated since :meth:`measuring_started`; on the CPU the runner's sampler stands."""
        if self._device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self._device)), CUDA_KIND
        return None

    def _set_threads(self, n: int) -> None:
        """torch's intra-op threads for this run; unload() puts the process's count back."""
        if self._threads_before is None:
            self._threads_before = torch.get_num_threads()
        torch.set_num_threads(n)

    def between_runs(self) -> None:
        """The continuous-batching manager stops (it was sized on the last run's warm-up batch and holds its
        blocks, shared prefixes included): the next run starts its own. Nothing else outlives a ``generate``."""
        self._stop_continuous()

    def _stop_continuous(self) -> None:
        if self._cb_manager is not None:
            try:
                self._cb_manager.stop(block=True, timeout=10)
            finally:
                self._cb_manager = None

    def unload(self) -> None:
        self._loop.close()
        self._stop_continuous()
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
    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[TokenScores]:
        """Teacher-forced log-softmax of every next token: one forward pass per batch (:mod:`.scoring`)."""
        from engine.backends.transformers.scoring import score_sequences

        if self._model is None:
            raise BackendError("score() called before load()")
        return score_sequences(self._model, self._device, sequences, top_k, full)


def device_name(device: torch.device) -> str:
    """The device's real name: the GPU's marketing name or the CPU model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from engine.measure.provenance import cpu_model

    return cpu_model()
