"""Any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, TensorRT-LLM ...), over HTTP.

Requests stream (``stream: true`` with ``stream_options.include_usage``); every SSE line
is stamped with ``time.perf_counter_ns()`` as it is read, before it is parsed. Like
vLLM's ``bench serve``, each completions chunk with choices (each chat chunk with
content) is one token-bearing chunk; the output
token count comes from the server's ``usage`` and is spread over the chunks (several
tokens per chunk under speculative decoding). A server that sends no usage gets its
output counted with the model's tokenizer, and the request is flagged
(``info()["output_tokens_source"]``).

Failures (unreachable URL, HTTP 4xx/5xx, an unknown model, malformed SSE, a stream
closed before ``[DONE]``, timeouts) end that request with its reason; the run goes on.

The API key is read from the environment variable named by the recipe when the
backend loads; it is sent as a bearer token and never stored, logged or returned.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from engine.backends.asyncloop import EventLoop
from engine.backends.base import REMOTE_DEVICE, BackendError, LoadReport, Progress, Request, Tokenizer, TokenScores
from engine.backends.openai.sse import EventStream, RequestFailed, http_reason
from engine.measure.records import RequestRecord
from engine.secrets import register
from engine.weights.models import ResolvedModel

T = TypeVar("T")


class OpenAIBackend:
    """Streams completions or chat completions from an OpenAI-compatible server."""

    name = "openai"

    def __init__(self) -> None:
        self._loop = EventLoop()
        self._session: Any = None
        self._tokenizer: Any = None
        self._recipe: Any = None
        self._url = ""
        self._headers: dict[str, str] = {}
        self._server_models: list[str] | None = None
        self._counts = {"usage": 0, "tokenizer": 0, "chunks": 0}
        self._base_url = ""
        self._model_name = ""
        self._endpoint = "completions"
        self._send_ignore_eos = True
        self._timeout_s = 600.0

    # -- lifecycle -----------------------------------------------------------------
    def load(self, model: ResolvedModel, recipe: Any, device: str, progress: Progress) -> LoadReport:
        """Read the API key from its variable, load the tokenizer, probe ``/models`` (not fatal)."""
        t0 = time.perf_counter()
        self._recipe = recipe
        key = None
        if recipe.api_key_env:
            key = os.environ.get(recipe.api_key_env)
            if not key:
                raise BackendError(f"the API key variable {recipe.api_key_env} is not set in the environment")
            register(key)  # scrubbed from every reason, log line and stored field of this process
        self._configure(
            recipe.base_url, recipe.model_name, recipe.endpoint, key, recipe.send_ignore_eos, recipe.timeout_s
        )
        self._tokenizer = _load_tokenizer(model, progress)
        progress(f"probing {self._base_url}/models", None)
        self.run(self._probe_models())
        return LoadReport(
            load_s=time.perf_counter() - t0,
            device_name=REMOTE_DEVICE,
            applied={"endpoint": self._endpoint, "model_name": self._model_name},
            vocab_size=len(self._tokenizer) if self._tokenizer is not None else None,
        )

    def _configure(
        self,
        base_url: str,
        model_name: str,
        endpoint: str,
        api_key: str | None,
        send_ignore_eos: bool = True,
        timeout_s: float = 600.0,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._model_name = model_name
        self._endpoint = endpoint
        self._send_ignore_eos = send_ignore_eos
        self._timeout_s = timeout_s
        path = "/chat/completions" if endpoint == "chat" else "/completions"
        self._url = self._base_url + path
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._loop.open()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this backend's own event loop (one loop for its whole life)."""
        result: T = self._loop.run(coro)
        return result

    async def _ensure_session(self) -> Any:
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                trust_env=False,
                read_bufsize=2**16,
            )
        return self._session

    async def _probe_models(self) -> None:
        import aiohttp

        session = await self._ensure_session()
        try:
            async with session.get(
                self._base_url + "/models", headers=self._headers, timeout=aiohttp.ClientTimeout(total=10)
            ) as resp:
                if resp.status == 200:
                    data = await resp.json(content_type=None)
                    self._server_models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
        except (TimeoutError, aiohttp.ClientError, ValueError):
            self._server_models = None  # requests will say why they fail

    def tokenizer(self) -> Tokenizer | None:
        return self._tokenizer

    def info(self) -> dict[str, Any]:
        """Server URL, model, endpoint and where output counts came from (never the key)."""
        import aiohttp

        return {
            "engine": self.name,
            "device_name": REMOTE_DEVICE,
            "base_url": self._base_url,
            "served_model": self._model_name,
            "endpoint": self._endpoint,
            "server_models": self._server_models,
            "output_tokens_source": dict(self._counts),
            "aiohttp": aiohttp.__version__,
        }

    @property
    def metrics_url(self) -> str | None:
        """The server's Prometheus ``/metrics`` (the base URL without ``/v1``), scraped beside the measured phase."""
        from engine.measure.server_metrics import metrics_url

        return metrics_url(self._base_url)

    def measuring_started(self) -> None:
        return None

    def peak_memory(self) -> tuple[int | None, str] | None:
        """A remote server's memory is not visible from the client."""
        return None, "not measured: the server's memory is not visible from the client"

    def unload(self) -> None:
        session, self._session = self._session, None
        self._loop.close(session.close() if session is not None and not session.closed else None)

    # -- requests ------------------------------------------------------------------
    def _payload(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model_name,
            "max_tokens": request.max_new_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
        }
        if request.ignore_eos and self._send_ignore_eos:
            body["ignore_eos"] = True
        if self._endpoint == "chat" and request.messages is not None:
            body["messages"] = [dict(m) for m in request.messages]
            return body
        text: str | list[int]
        if self._tokenizer is not None:
            text = self._tokenizer.decode(request.prompt)
        else:
            text = request.prompt  # token ids: vLLM's completions endpoint accepts them
        if self._endpoint == "chat":
            if not isinstance(text, str):
                raise RequestFailed("the chat endpoint needs text prompts; this model has no tokenizer")
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return body

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        """The batch's requests at once (each its own HTTP stream); raise RequestFailed for one alone.

        In a batch of several, a failed request's reason is kept on its record and the others go on."""
        if len(batch) == 1:
            await self._one(batch[0], records[0])
            return
        outcomes = await asyncio.gather(
            *(self._one(r, rec) for r, rec in zip(batch, records, strict=True)), return_exceptions=True
        )
        for rec, out in zip(records, outcomes, strict=True):
            if isinstance(out, RequestFailed):
                rec.error = rec.error or str(out)
            elif isinstance(out, BaseException):
                raise out

    async def _one(self, request: Request, record: RequestRecord) -> None:
        """Send one request and append each content chunk's stamp to ``record``; raise RequestFailed."""
        import aiohttp

        body = self._payload(request)
        session = await self._ensure_session()
        events = EventStream(record, chat=self._endpoint == "chat")
        try:
            record.send_ns = time.perf_counter_ns()  # after the payload is built, as vLLM's bench serve
            async with session.post(self._url, json=body, headers=self._headers) as resp:
                if resp.status != 200:
                    raise RequestFailed(http_reason(resp.status, await resp.text()))
                await events.read(resp.content)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self._failure(exc) from exc
        if not events.done:
            raise RequestFailed(f"stream closed early (no [DONE]) after {len(record.chunk_ns)} chunk(s)")
        self._count_tokens(record, events.usage, events.texts)
        if request.want_text:
            record.text = "".join(events.texts)

    def _failure(self, exc: BaseException) -> RequestFailed:
        """The request-level reason for a timeout or an aiohttp error."""
        import aiohttp

        if isinstance(exc, TimeoutError):
            return RequestFailed(f"timed out after {self._timeout_s:.0f} s")
        if isinstance(exc, aiohttp.ClientConnectorError):
            return RequestFailed(f"cannot connect to {self._base_url}: {exc.os_error or exc}")
        if isinstance(exc, aiohttp.ClientPayloadError):
            return RequestFailed(f"stream closed early: {exc}")
        return RequestFailed(f"{type(exc).__name__}: {exc}")  # RequestFailed scrubs every reason

    def _count_tokens(self, record: RequestRecord, usage: dict[str, Any] | None, texts: list[str]) -> None:
        """Set the chunks' token counts from usage (spread evenly), else from the tokenizer (flagged)."""
        n_chunks = len(record.chunk_tokens)
        total: int | None = None
        if usage is not None and isinstance(usage.get("completion_tokens"), int):
            total = usage["completion_tokens"]
            self._counts["usage"] += 1
            if isinstance(usage.get("prompt_tokens"), int):
                record.prompt_tokens = usage["prompt_tokens"]
        elif self._tokenizer is not None:
            total = len(self._tokenizer.encode("".join(texts), add_special_tokens=False))
            self._counts["tokenizer"] += 1
        else:
            self._counts["chunks"] += 1  # one token per chunk: the only count left
        if total is None or n_chunks == 0 or total == n_chunks:
            return
        if total < n_chunks:  # more text chunks than tokens (detokenizer splits): keep the stamps, cap the count
            record.chunk_tokens[:] = [1 if i < total else 0 for i in range(n_chunks)]
            return
        base, extra = divmod(total, n_chunks)
        record.chunk_tokens[:] = [base + (1 if i < extra else 0) for i in range(n_chunks)]

    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[TokenScores]:
        """Prompt log-likelihoods via the completions endpoint's ``echo`` + ``logprobs``.

        Needs a server that supports ``echo`` with ``logprobs`` on the legacy completions
        endpoint and a tokenizer; vLLM's OpenAI server does not support ``echo`` with
        logprobs for prompts in every version: a refusal raises a clear BackendError.
        """
        if full:
            raise BackendError("full next-token distributions are not available over the OpenAI API")
        return self.run(_score_echo(self, sequences, top_k))


async def _score_echo(backend: OpenAIBackend, sequences: list[list[int]], top_k: int) -> list[TokenScores]:
    import numpy as np

    session = await backend._ensure_session()
    out = []
    for seq in sequences:
        body = {
            "model": backend._model_name,
            "prompt": seq,
            "max_tokens": 1,
            "echo": True,
            "logprobs": max(top_k, 1),
            "temperature": 0.0,
        }
        async with session.post(backend._base_url + "/completions", json=body, headers=backend._headers) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise BackendError(  # http_reason scrubs the server's text
                    f"scoring (echo + logprobs) is not supported by this server: {http_reason(resp.status, text)}"
                )
        try:
            lp = json.loads(text)["choices"][0]["logprobs"]
            token_lps = lp["token_logprobs"][1 : len(seq)]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError("scoring (echo + logprobs) is not supported by this server: no prompt logprobs") from exc
        if len(token_lps) != len(seq) - 1 or any(v is None for v in token_lps):
            raise BackendError("scoring (echo + logprobs) is not supported by this server: prompt logprobs missing")
        out.append(TokenScores(token_logprobs=np.asarray(token_lps, dtype=np.float32)))
    return out


def _load_tokenizer(model: ResolvedModel, progress: Progress, trust_remote_code: bool = False) -> Any | None:
    if model.path is None:
        return None  # synthetic weights: prompts go as token ids
    from transformers import AutoTokenizer

    progress("loading tokenizer", None)
    try:
        return AutoTokenizer.from_pretrained(
            model.path, revision=model.spec.revision, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as exc:
        raise BackendError(f"cannot load the tokenizer of {model.label}: {exc}") from exc
