"""vLLM in this process: ``AsyncLLM`` with per-token streaming (``RequestOutputKind.DELTA``).

Every delta output is stamped with ``time.perf_counter_ns()`` when the coroutine
receives it, with its number of new tokens (several under speculative decoding).
The engine lives on this backend's own event loop for its whole life.

Also holds what the managed server shares: the recipe's engine arguments
(:func:`engine_kwargs`, :func:`server_args`) and the environment vLLM needs on a CPU
(:func:`vllm_env`). Scripts that start vLLM need ``if __name__ == "__main__":``
(vLLM spawns its engine core process).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from engine.backends.asyncloop import EventLoop
from engine.backends.base import (
    Backend,
    BackendError,
    LoadReport,
    Progress,
    Request,
    Tokenizer,
    TokenScores,
    device_name,
)
from engine.backends.vllm.recipe import VllmKnobs
from engine.jsonvalue import JSONObject
from engine.measure.records import RequestRecord
from engine.weights.models import ResolvedModel

T = TypeVar("T")


def resolved_dtype(recipe: VllmKnobs, device: str) -> str:
    """``auto`` is float32 on the CPU (no AVX512-BF16 here), the model's own dtype on a GPU."""
    if recipe.dtype == "auto":
        return "float32" if device == "cpu" else "auto"
    return recipe.dtype


def speculative_config(recipe: VllmKnobs) -> JSONObject | None:
    """vLLM's ``speculative_config`` for the recipe, or None."""
    if recipe.speculative == "none":
        return None
    cfg: JSONObject = {"num_speculative_tokens": recipe.num_speculative_tokens}
    if recipe.speculative == "ngram":
        cfg.update(
            method="ngram", prompt_lookup_min=recipe.prompt_lookup_min, prompt_lookup_max=recipe.prompt_lookup_max
        )
    else:
        cfg.update(
            method={"draft": "draft_model"}.get(recipe.speculative, recipe.speculative), model=recipe.speculative_model
        )
    return cfg


def engine_kwargs(recipe: VllmKnobs, device: str, model_path: str) -> JSONObject:
    """``AsyncEngineArgs`` keyword arguments for the recipe (knobs left None keep vLLM's defaults)."""
    kw: JSONObject = {
        "model": model_path,
        "dtype": resolved_dtype(recipe, device),
        "enforce_eager": (device == "cpu") if recipe.enforce_eager == "auto" else recipe.enforce_eager == "on",
        "tensor_parallel_size": recipe.tensor_parallel_size,
        "disable_log_stats": False,
        "trust_remote_code": bool(getattr(recipe, "trust_remote_code", False)),  # off unless the recipe says so
    }
    if device != "cpu":
        kw["gpu_memory_utilization"] = recipe.gpu_memory_utilization
    if recipe.quantization != "none":
        kw["quantization"] = recipe.quantization
    if recipe.kv_cache_dtype != "auto":
        kw["kv_cache_dtype"] = recipe.kv_cache_dtype
    for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size"):
        value = getattr(recipe, key)
        if value is not None:
            kw[key] = value
    for key in ("enable_prefix_caching", "enable_chunked_prefill"):
        if getattr(recipe, key) != "auto":
            kw[key] = getattr(recipe, key) == "on"
    spec = speculative_config(recipe)
    if spec is not None:
        kw["speculative_config"] = spec
    return kw


def server_args(recipe: VllmKnobs, device: str, model_path: str) -> list[str]:
    """The same knobs as command-line flags of vLLM's OpenAI API server."""
    args: list[str] = []
    for key, value in engine_kwargs(recipe, device, model_path).items():
        if key == "disable_log_stats":
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):
            args += [flag, json.dumps(value)]
        else:
            args += [flag, str(value)]
    return args


def vllm_env(recipe: VllmKnobs, device: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for vLLM: KV cache size on the CPU, a project cache root, a private TMPDIR, offline hub."""
    from engine.settings import get_settings

    env = dict(os.environ if base is None else base)
    cache = get_settings().cache_dir / "vllm"
    cache.mkdir(parents=True, exist_ok=True)
    env.setdefault("VLLM_CACHE_ROOT", str(cache))
    env["TMPDIR"] = tempfile.mkdtemp(prefix="vllm-", dir=str(cache))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # vLLM's default is stdout: keep it for --json
    if device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(recipe.cpu_kvcache_space_gib)
    else:
        env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
    return env


def vllm_version() -> str | None:
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def check_importable() -> None:
    """Raise BackendError when vLLM cannot be imported here, saying how to install it."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA torchvision next to it
        raise BackendError(
            f"vLLM is not importable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "install it with `make install` (vllm-cpu on CPU machines, vllm on GPU machines)"
        ) from exc


_ENV_KEYS = (
    "VLLM_CACHE_ROOT",
    "TMPDIR",
    "HF_HUB_OFFLINE",
    "VLLM_NO_USAGE_STATS",
    "DO_NOT_TRACK",
    "VLLM_LOGGING_STREAM",
    "VLLM_CPU_KVCACHE_SPACE",
    "CUDA_VISIBLE_DEVICES",
)


class VllmBackend(Backend):
    """vLLM's AsyncLLM in this process, streaming deltas."""

    name = "vllm"

    def __init__(self) -> None:
        self._loop = EventLoop()
        self._engine: Any = None
        self._tokenizer: Tokenizer | None = None
        self._device = "cpu"
        self._kwargs: JSONObject = {}
        self._saved_env: dict[str, str | None] = {}
        self._detokenize = True
        self._device_name = ""
        self._spec_baseline: dict[str, float] = {}

    def load(self, model: ResolvedModel, recipe: VllmKnobs, device: str, progress: Progress) -> LoadReport:
        """Start the engine (30-60 s on a 2-core CPU with enforce_eager).

        Synthetic weights: vLLM builds random weights itself (``load_format="dummy"``) from a
        folder holding only the architecture's config.json; no tokenizer (prompts are token ids).
        """
        from engine.weights.models import synthetic_folder

        synthetic = model.synthetic_config is not None
        path = str(synthetic_folder(model.synthetic_config)) if synthetic else model.path  # type: ignore[arg-type]
        if path is None:
            raise BackendError("vLLM needs a model folder or hub id")
        t0 = time.perf_counter()
        self._enter_env(vllm_env(recipe, device))
        check_importable()
        self._device = device
        self._device_name = device_name(device)
        self._kwargs = engine_kwargs(recipe, device, path)
        if synthetic:
            self._kwargs.update(load_format="dummy", skip_tokenizer_init=True)
        self._detokenize = not synthetic
        progress("starting the vLLM engine", None)
        self._start_engine()
        self._tokenizer = self.run(_get_tokenizer(self._engine)) if not synthetic else None
        cfg = self._engine.model_config
        return LoadReport(
            load_s=time.perf_counter() - t0,
            device_name=self._device_name,
            applied={k: v for k, v in self._kwargs.items() if k != "model"},
            vocab_size=cfg.get_vocab_size(),
            context_length=cfg.max_model_len,
        )

    def _enter_env(self, env: dict[str, str]) -> None:
        """Put vLLM's variables into this process's environment (``unload`` gives the old ones back)."""
        for key in _ENV_KEYS:
            if key in env:
                self._saved_env.setdefault(key, os.environ.get(key))
                os.environ[key] = env[key]
        tempfile.tempdir = None  # pick up the private TMPDIR

    def _start_engine(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        async def start() -> AsyncLLM:
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**self._kwargs))

        self._loop.open()
        try:
            self._engine = self.run(start())
        except Exception as exc:
            self._loop.close()
            raise BackendError(f"vLLM failed to start: {str(exc).splitlines()[0] if str(exc) else exc!r}") from exc

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run a coroutine on the engine's event loop."""
        return self._loop.run(coro)

    def _sampling(self, max_new_tokens: int, ignore_eos: bool, **extra: object) -> object:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            max_tokens=max_new_tokens,
            ignore_eos=ignore_eos,
            temperature=0.0,
            output_kind=RequestOutputKind.DELTA,
            detokenize=self._detokenize,
            **extra,
        )

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        """The batch's requests at once; each delta's stamp and new-token count go into its record."""
        if len(batch) == 1:
            await self._one(batch[0], records[0])
        else:
            await asyncio.gather(*(self._one(r, rec) for r, rec in zip(batch, records, strict=True)))

    async def _one(self, request: Request, record: RequestRecord) -> None:
        from vllm.inputs import TokensPrompt

        sampling = self._sampling(request.max_new_tokens, request.ignore_eos)
        perf = time.perf_counter_ns
        texts: list[str] = []
        record.send_ns = perf()
        async for out in self._engine.generate(
            TokensPrompt(prompt_token_ids=request.prompt), sampling, request_id=uuid.uuid4().hex
        ):
            t = perf()
            n = len(out.outputs[0].token_ids) if out.outputs else 0
            if n:
                record.chunk_ns.append(t)
                record.chunk_tokens.append(n)
                if request.want_text:
                    texts.append(out.outputs[0].text)
            if record.cached_prompt_tokens is None and out.num_cached_tokens is not None:
                record.cached_prompt_tokens = int(out.num_cached_tokens)  # the prefix cache's hits for this prompt
        if request.want_text:
            record.text = "".join(texts)

    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[TokenScores]:
        """Prompt log-likelihoods from ``prompt_logprobs`` (top-k up to vLLM's cap; no full distributions)."""
        import numpy as np
        from vllm.inputs import TokensPrompt

        k = max(top_k, 0)
        sampling = self._sampling(1, True, prompt_logprobs=k)

        async def one(seq: list[int]) -> TokenScores:
            final = None
            async for out in self._engine.generate(
                TokensPrompt(prompt_token_ids=seq), sampling, request_id=uuid.uuid4().hex
            ):
                if out.prompt_logprobs is not None:
                    final = out
            if final is None:
                raise BackendError("vLLM returned no prompt logprobs")
            rows = final.prompt_logprobs[1:]  # position 0 has none
            lps = np.asarray([row[tok].logprob for row, tok in zip(rows, seq[1:], strict=True)], dtype=np.float32)
            top_ids = top_lps = None
            if k:
                top_ids = np.zeros((len(rows), k), dtype=np.int64)
                top_lps = np.full((len(rows), k), -np.inf, dtype=np.float32)
                for i, row in enumerate(rows):
                    ranked = sorted(
                        ((lp.rank or 0, tid, lp.logprob) for tid, lp in row.items() if lp.rank), key=lambda x: x[0]
                    )[:k]
                    for j, (_, tid, lp) in enumerate(ranked):
                        top_ids[i, j], top_lps[i, j] = tid, lp
            return TokenScores(token_logprobs=lps, top_ids=top_ids, top_logprobs=top_lps)

        async def all_() -> list[TokenScores]:
            return [await one(s) for s in sequences]

        return self.run(all_())

    def tokenizer(self) -> Tokenizer | None:
        return self._tokenizer

    def info(self) -> JSONObject:
        """vLLM version, engine arguments and speculative-decoding acceptance where used."""
        import torch

        out: JSONObject = {
            "engine": self.name,
            "vllm": vllm_version(),
            "torch": torch.__version__,
            "device": self._device,
            "device_name": self._device_name,
            "engine_args": {k: v for k, v in self._kwargs.items() if k != "model"},
        }
        spec = spec_stats_from(_spec_counters(), self._spec_baseline)
        if spec:
            out["spec_decode"] = spec
        return out

    def measuring_started(self) -> None:
        """Snapshot the spec-decode counters: ``info()`` reports the measured phase only."""
        self._spec_baseline = _spec_counters()

    def peak_memory(self) -> tuple[int | None, str] | None:
        return None  # the engine core is a child process: the runner's process-tree sampler sees it

    def unload(self) -> None:
        if self._engine is not None:
            try:
                self._engine.shutdown()
            finally:
                self._engine = None
        self._loop.close()  # cancels the engine's output-queue task
        for key, value in self._saved_env.items():  # give the process its environment back
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env = {}
        tempfile.tempdir = None


async def _get_tokenizer(engine: Any) -> Tokenizer:
    tok = engine.get_tokenizer()
    if asyncio.iscoroutine(tok):
        tok = await tok
    return tok


def _spec_counters() -> dict[str, float]:
    """vLLM's counters in this process (empty when its metrics cannot be read)."""
    try:
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        return {m.name: m.value for m in get_metrics_snapshot() if isinstance(m, Counter)}
    except Exception:  # noqa: BLE001 -- metrics are optional provenance
        return {}


def spec_stats_from(values: dict[str, float], baseline: dict[str, float] | None = None) -> JSONObject | None:
    """Acceptance rate and mean accepted length from vLLM's spec-decode counters.

    ``baseline`` is the counters' snapshot taken as the measured phase started: the figures
    count the measured phase only (warm-up excluded), as the transformers engine's do.
    """
    base = baseline or {}

    def count(name: str) -> float | None:
        value = values.get(name)
        return None if value is None else value - base.get(name, 0.0)

    drafts = count("vllm:spec_decode_num_drafts")
    draft_tokens = count("vllm:spec_decode_num_draft_tokens")
    accepted = count("vllm:spec_decode_num_accepted_tokens")
    if not draft_tokens or accepted is None:
        return None
    return {
        "draft_tokens": int(draft_tokens),
        "accepted_tokens": int(accepted),
        "acceptance_rate": accepted / draft_tokens,
        "mean_acceptance_length": (1 + accepted / drafts) if drafts else None,
    }
