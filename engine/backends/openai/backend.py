"""Any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, TensorRT-LLM ...), over HTTP.

Requests stream (``stream: true`` with ``stream_options.include_usage``) through LatencyLab's own
HTTP client (:mod:`engine.backends.openai.http`) on uvloop where it is installed: every network
read is stamped with ``time.perf_counter_ns()`` as it arrives and the SSE events are parsed
afterwards (:mod:`engine.backends.openai.sse`), each stamped by the read that completed it. Like
vLLM's ``bench serve``, each completions chunk with choices (each chat chunk with content) is one
token-bearing chunk; the output token count comes from the server's ``usage`` and is spread over
the chunks (several tokens per chunk under speculative decoding). A server that sends no usage
gets its output counted with the model's tokenizer, and the request is flagged
(``info()["output_tokens_source"]``).

The tokenizer is the model's ``tokenizer.json`` read by the ``tokenizers`` library, or the
server's ``/tokenize`` (:mod:`engine.backends.openai.tokenizer`): nothing here imports
transformers or torch, so a run against an endpoint starts in about a second.

Failures (unreachable URL, HTTP 4xx/5xx, an unknown model, malformed SSE, a stream
closed before ``[DONE]``, timeouts) end that request with its reason; the run goes on.

The API key is read from the environment variable named by the recipe when the
backend loads; it is sent as a bearer token and never stored, logged or returned.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, TypeVar

from engine.backends.asyncloop import EventLoop
from engine.backends.base import (
    REMOTE_DEVICE,
    Backend,
    BackendError,
    ClientTraits,
    Launcher,
    LoadReport,
    Progress,
    Request,
    SenderPool,
    Tokenizer,
    TokenScores,
)
from engine.backends.openai.client_settings import api_key
from engine.backends.openai.deadlines import Deadlines
from engine.backends.openai.http import Client, ConnectFailed, Exchange, HttpError
from engine.backends.openai.served import Context, Served, context_of, probe_models
from engine.backends.openai.sse import EventStream, RequestFailed, http_reason
from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.records import RequestRecord

if TYPE_CHECKING:
    from engine.spec.recipes import EngineRecipe
    from engine.weights.models import ResolvedModel

try:  # orjson writes a request body several times faster than json
    from orjson import dumps as _dumps
except ImportError:  # pragma: no cover

    def _dumps(obj: object) -> bytes:
        return json.dumps(obj).encode()


T = TypeVar("T")
OPEN_WAIT_S = 10.0  # the most a phase waits for its connections to open before it starts


class OpenAIBackend(Backend):
    """Streams completions or chat completions from an OpenAI-compatible server."""

    name = "openai"

    def __init__(self) -> None:
        self._loop = EventLoop(fast=True)
        self._http: Client | None = None
        self._tokenizer: Tokenizer | None = None
        self._path = "/completions"
        self._headers: dict[str, str] = {}
        self._served: Served | None = None  # what /models said (None: no answer)
        self._context = Context(None, "unknown")  # what the run plans against (served.py)
        self._counts = {"usage": 0, "tokenizer": 0, "chunks": 0}
        self._base_url = ""
        self._model_name = ""
        self._endpoint = "completions"
        self._send_ignore_eos = True
        self._timeout_s = 600.0
        self._deadlines = Deadlines(self._timeout_s)  # each request's time limit, one timer for all
        self._api_key_env: str | None = None
        self._api_key: str | None = None  # read from its variable at load (registered: scrubbed everywhere)
        self._tokenizer_source: JSONObject | None = None

    # -- lifecycle -----------------------------------------------------------------
    def load(self, model: ResolvedModel, recipe: EngineRecipe, device: str, progress: Progress) -> LoadReport:
        """Read the API key from its variable, load the tokenizer, probe ``/models`` (not fatal) for the served
        model and its context (or the recipe's ``max_model_len``)."""
        from engine.backends.openai.recipe import OpenAIRecipe

        if not isinstance(recipe, OpenAIRecipe):  # the registry hands each engine its own recipe class
            raise BackendError(f"the openai engine loads an openai recipe, not {type(recipe).__name__}")
        t0 = time.perf_counter()
        key = api_key(recipe.api_key_env)  # scrubbed from every reason, log line and stored field of this process
        self.configure(
            recipe.base_url,
            recipe.model_name,
            recipe.endpoint,
            key,
            recipe.send_ignore_eos,
            recipe.timeout_s,
            api_key_env=recipe.api_key_env,
        )
        self._tokenizer = self._load_tokenizer(model, progress)
        progress(f"probing {self._base_url}/models", None)
        self.run(self._probe_models(recipe.max_model_len))
        return LoadReport(
            load_s=time.perf_counter() - t0,
            device_name=REMOTE_DEVICE,
            applied={"endpoint": self._endpoint, "model_name": self._model_name},
            vocab_size=(len(self._tokenizer) or None) if self._tokenizer is not None else None,
            context_length=self._context.length,
        )

    def _load_tokenizer(self, model: ResolvedModel, progress: Progress) -> Tokenizer | None:
        """The model's tokenizer.json (tokenizers), else the server's /tokenize; None for synthetic weights."""
        from engine.backends.openai.server_tokenizer import probe
        from engine.backends.openai.tokenizer import FastTokenizer, load_tokenizer

        if model.path is not None:
            progress("loading tokenizer", None)

        headers = {k: v for k, v in self._headers.items() if k == "Authorization"}
        try:
            tokenizer = load_tokenizer(
                model.path, model.spec.revision, model.label, lambda: probe(self.server_root, self._model_name, headers)
            )
        except LookupError as exc:
            raise BackendError(str(exc)) from exc
        if isinstance(tokenizer, FastTokenizer):
            self._tokenizer_source = {"kind": "files", "path": model.path, "revision": model.spec.revision}
        elif tokenizer is not None:
            self._tokenizer_source = {"kind": "server"}
        return tokenizer

    def client_settings(self) -> JSONObject:
        """How another process builds this same client (:mod:`engine.backends.openai.client_process`): never the key."""
        return {
            "base_url": self._base_url,
            "model_name": self._model_name,
            "endpoint": self._endpoint,
            "api_key_env": self._api_key_env,
            "send_ignore_eos": self._send_ignore_eos,
            "timeout_s": self._timeout_s,
            "tokenizer": self._tokenizer_source,
        }

    def remote_client_settings(self) -> JSONObject:
        """:meth:`client_settings` for a process on another node (engine/backends/openai/client_settings.py)."""
        from engine.backends.openai.client_settings import remote_settings

        return remote_settings(self.client_settings(), self._api_key, self._tokenizer)

    def client_pool(self, n: int, progress: Progress, launcher: Launcher | None = None) -> SenderPool | None:
        """``n`` client processes sending for this client (:class:`~engine.backends.openai.process_pool.ClientProcesses`),
        placed by ``launcher`` (this host's by default; Ray nodes' for ``--load-nodes``, handed down by the job)."""
        from engine.backends.openai.process_pool import ClientProcesses

        return ClientProcesses(self, n, launcher).start(progress)

    @property
    def server_root(self) -> str:
        """The server's root URL: the base URL without its ``/v1`` (where ``/tokenize`` and ``/metrics`` live)."""
        return self._base_url.removesuffix("/v1")

    def configure(
        self,
        base_url: str,
        model_name: str,
        endpoint: str,
        api_key: str | None,
        send_ignore_eos: bool = True,
        timeout_s: float = 600.0,
        api_key_env: str | None = None,
    ) -> None:
        """Point the client at a server (``load`` does it from the recipe; a client process from the settings)."""
        self._api_key_env = api_key_env
        self._base_url = base_url.rstrip("/")
        self._model_name = model_name
        self._endpoint = endpoint
        self._send_ignore_eos = send_ignore_eos
        self._timeout_s = timeout_s
        self._deadlines = Deadlines(timeout_s)
        self._path = "/chat/completions" if endpoint == "chat" else "/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self._api_key = api_key
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        try:
            self._http = Client(self._base_url, self._headers)
        except HttpError as exc:
            raise BackendError(str(exc)) from exc
        self._loop.open()

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run a coroutine on this backend's own event loop (one loop for its whole life)."""
        return self._loop.run(coro)

    @property
    def http(self) -> Client:
        if self._http is None:
            raise BackendError("the OpenAI client is not configured: load() first")
        return self._http

    async def _probe_models(self, max_model_len: int | None = None) -> None:
        """The served models and their context (:mod:`engine.backends.openai.served`), with the recipe's."""
        self._served = await probe_models(self.http)  # None: requests will say why they fail
        self._context = context_of(self._served, self._model_name, max_model_len)

    def tokenizer(self) -> Tokenizer | None:
        return self._tokenizer

    def use_tokenizer(self, tokenizer: Tokenizer | None) -> None:
        """The tokenizer a client process was handed (its driver's, rebuilt from the settings)."""
        self._tokenizer = tokenizer

    def info(self) -> JSONObject:
        """Server URL, model, endpoint and where output counts came from (never the key)."""
        return {
            "engine": self.name,
            "device_name": REMOTE_DEVICE,
            "base_url": self._base_url,
            "served_model": self._model_name,
            "endpoint": self._endpoint,
            "server_models": self._served.models if self._served is not None else None,
            **self._context.facts(),  # the context planned against, where from; unknown: a note saying so
            "output_tokens_source": dict(self._counts),
            "http_client": "latencylab (HTTP/1.1, a stamp per network read"
            + (", the kernel's receive stamps)" if self.traits().kernel_stamps else ")"),
            "event_loop": self._loop.kind,
            "tokenizer": type(self._tokenizer).__name__ if self._tokenizer is not None else None,
        }

    def traits(self) -> ClientTraits:
        """An HTTP client: its measured phase without the cyclic collector, its reads stamped by the kernel where the
        option is known, and the server's Prometheus ``/metrics`` (the base URL without ``/v1``) scraped beside it."""
        from engine.measure.server_metrics import metrics_url

        stamps = self._http is not None and self._http.kernel_stamps
        return ClientTraits(pauses_gc=True, kernel_stamps=stamps, metrics_url=metrics_url(self._base_url))

    def measuring_started(self) -> None:
        return None

    def peak_memory(self) -> tuple[int | None, str] | None:
        """A remote server's memory is not visible from the client."""
        return None, "not measured: the server's memory is not visible from the client"

    def unload(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()
        self._loop.close()

    # -- requests ------------------------------------------------------------------
    def _payload(self, request: Request) -> JSONObject:
        body: JSONObject = {
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
        tokenizer = self._tokenizer
        if tokenizer is not None and not (getattr(tokenizer, "sends_ids", False) and self._endpoint != "chat"):
            text = tokenizer.decode(request.prompt)
        else:
            text = request.prompt  # token ids: vLLM's completions endpoint accepts them
        if self._endpoint == "chat":
            if not isinstance(text, str):
                raise RequestFailed("the chat endpoint needs text prompts; this model has no tokenizer")
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return body

    async def open_connections(self, n: int) -> None:
        """``n`` connections opened before a measured phase with up to ``n`` streams at once: the handshakes
        are done before the first request is due, not as the phase's first wave goes out (where they
        held back its sends, one after another). At most :data:`OPEN_WAIT_S` is spent: a server that does
        not answer leaves the rest to the requests (each under its own time limit)."""
        try:
            await asyncio.wait_for(self.http.open(n), min(self._timeout_s, OPEN_WAIT_S))
        except TimeoutError:
            pass

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
        """Send one request, then its chunks' stamps into ``record`` from the stamped reads; raise RequestFailed."""
        body = _dumps(self._payload(request))
        events = EventStream(record, chat=self._endpoint == "chat")
        ex: Exchange | None = None
        record.send_ns = time.perf_counter_ns()  # after the payload is built, as vLLM's bench serve
        task = self._deadlines.enter()
        try:
            ex = await self.http.request("POST", self._path, body)
            record.send_ns = ex.sent_ns  # the attempt that was answered (a dead pooled connection is retried)
            await self.http.read(ex)
        except asyncio.CancelledError:  # the time limit, or cancelled on purpose: the record keeps what had arrived
            timed_out = self._deadlines.leave(task)
            _parse_quietly(events, ex)
            if timed_out:
                raise RequestFailed(f"timed out after {self._timeout_s:.0f} s") from None
            raise
        except ConnectFailed as exc:
            raise RequestFailed(f"cannot connect to {self._base_url}: {exc.reason}") from exc
        except HttpError as exc:  # the connection closed or the answer was malformed
            if ex is None or ex.status != 200:
                raise RequestFailed(f"stream closed early: {exc}") from exc
        finally:
            self._deadlines.leave(task)
        if ex.status != 200:
            raise RequestFailed(http_reason(ex.status, ex.body.decode(errors="replace")))
        events.parse(ex.reads)
        if not events.done:
            raise RequestFailed(f"stream closed early (no [DONE]) after {len(record.chunk_ns)} chunk(s)")
        self._count_tokens(record, events.usage, events.texts)
        if request.want_text:
            record.text = "".join(events.texts)

    def _count_tokens(self, record: RequestRecord, usage: JSONMapping | None, texts: list[str]) -> None:
        """Set the chunks' token counts from usage (spread evenly), else from the tokenizer (flagged)."""
        n_chunks = len(record.chunk_tokens)
        total: int | None = None
        if usage is not None and isinstance(usage.get("completion_tokens"), int):
            total = usage["completion_tokens"]
            self._counts["usage"] += 1
            if isinstance(usage.get("prompt_tokens"), int):
                record.prompt_tokens = usage["prompt_tokens"]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                record.cached_prompt_tokens = details["cached_tokens"]  # the server's prefix-cache hits
        elif self._tokenizer is not None and not getattr(self._tokenizer, "sends_ids", False):
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
        from engine.backends.openai.scoring import score_echo

        return self.run(score_echo(self.http, self._model_name, sequences, top_k))


def _parse_quietly(events: EventStream, ex: Exchange | None) -> None:
    """What had arrived before a cancellation or a timeout, kept on the record (a bad line ends it quietly)."""
    if ex is None or ex.status != 200:
        return
    try:
        events.parse(ex.reads)
    except RequestFailed:
        pass
