"""The backend Protocol and its lazy registry.

A backend loads a model for a recipe on a device, streams batches of requests on its own
event loop while appending every chunk's ``time.perf_counter_ns()`` stamp (taken when the
tokens are available on the host) and token count to the request's record, says what it
ran, and unloads. Backends never compute metrics.

**One streaming contract** for every engine: :meth:`Backend.stream` sends one batch of
:class:`Request` s and fills their :class:`~engine.measure.records.RequestRecord` s (the send
stamp, then each chunk); :meth:`Backend.run` runs a coroutine on the loop the backend lives
on (the load driver's whole phase). A serving engine sends a batch's requests concurrently
and may be called again before an earlier call returns; the in-process transformers engine
generates a batch in one ``model.generate`` (blocking its loop: arrivals queue behind it).

Each engine's descriptor (:mod:`engine.spec.engines`) names its backend as a
``"module:Class"`` string, so importing this module (as the UI does) never imports torch
or vllm; :func:`get_backend` imports it when a job needs it.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.client_lag import ClientSample
from engine.measure.records import RequestRecord

if TYPE_CHECKING:
    import numpy as np

    from engine.spec.recipes import EngineRecipe
    from engine.weights.models import ResolvedModel

T = TypeVar("T")

Progress = Callable[[str, float | None], None]


class BackendError(RuntimeError):
    """The engine failed; the message is the reason stored with the failed run."""


class RequestError(BackendError):
    """One request failed at the request level (connection, HTTP status, timeout, malformed or
    cut stream): the load driver records it on that request and the run goes on. Any other
    exception from a backend (engine death, a bug) ends the run as failed."""


Message = Mapping[str, str]  # one chat message as the OpenAI API and chat templates take it: role, content
# What a chat template gives: the rendered text (``tokenize=False``), its token ids, or ``{"input_ids": ids, ...}``
# (``return_dict=True``, transformers 5's default).
ChatTemplateOutput = str | list[int] | Mapping[str, list[int]]


@dataclass(frozen=True, slots=True)
class Request:
    """One request as an engine receives it: the prompt's token ids (and its chat messages, where the
    source has them: a chat endpoint sends those), how many tokens to generate, whether to stop at EOS,
    and whether the reply's text is wanted back (the next turn of a session carries it)."""

    prompt: list[int]
    max_new_tokens: int
    ignore_eos: bool = True
    messages: tuple[Message, ...] | None = None
    want_text: bool = False


class Tokenizer(Protocol):
    """What the harness asks of a tokenizer: a Hugging Face tokenizer is one, and so are the OpenAI client's
    light ones (:mod:`engine.backends.openai.tokenizer`: tokenizer.json without transformers; the server's
    /tokenize). ``apply_chat_template`` is Hugging Face's (sessions' prompts: :func:`chat_prompt_ids`)."""

    @property
    def eos_token_id(self) -> int | None: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...

    def __len__(self) -> int: ...

    def apply_chat_template(
        self,
        conversation: Sequence[JSONMapping],
        add_generation_prompt: bool = ...,
        tokenize: bool = ...,
        return_dict: bool = ...,
        **kw: object,
    ) -> ChatTemplateOutput: ...


def chat_prompt_ids(tokenizer: Tokenizer, messages: Sequence[Message]) -> list[int]:
    """A conversation as the prompt token ids its next reply follows (the chat template, generation prompt
    added), from any :class:`Tokenizer` (transformers 5 returns a dict unless told not to)."""
    out = tokenizer.apply_chat_template(
        [dict(m) for m in messages], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    ids = out["input_ids"] if isinstance(out, Mapping) else out
    return [int(i) for i in ids]


REMOTE_DEVICE = "remote server (unknown device)"


@dataclass
class LoadReport:
    """What was loaded and how: the time it took and the knobs actually applied.

    ``device_name`` is the real name of the hardware that runs the model, the same for every
    engine (:func:`device_name`): the CPU model on the CPU, the GPU's name on a GPU, and
    :data:`REMOTE_DEVICE` for a server the job does not manage. ``weights_memory_bytes`` is
    the storage of the model's parameters and buffers as loaded, after any quantization
    (real bytes of quantized tensor subclasses); None where the weights live out of reach
    (another process or a remote server).
    """

    load_s: float
    device_name: str
    applied: JSONObject = field(default_factory=dict)
    parameters: int | None = None
    vocab_size: int | None = None
    context_length: int | None = None
    weights_memory_bytes: int | None = None


@dataclass
class TokenScores:
    """What a backend says about one scored sequence of ``n`` tokens, per position 1..n-1.

    Row ``i`` describes the next-token distribution after ``tokens[: i + 1]``:
    ``token_logprobs[i]`` = log p(tokens[i + 1] | tokens[: i + 1]) (all a perplexity needs);
    ``top_ids`` / ``top_logprobs`` ([n-1, k], best first) the ``k`` most likely tokens
    (top-1 agreement needs k >= 1; a vLLM backend gets them from ``prompt_logprobs``, an
    OpenAI endpoint from ``echo`` + ``logprobs``, both usually capped at k <= 20);
    ``full`` ([n-1, vocab] log-softmax) only when asked for and the engine can give it
    (KL divergence against a baseline needs it; without it KL is reported unavailable).
    Arrays are numpy float32 / int64 on the host.
    """

    token_logprobs: np.ndarray
    top_ids: np.ndarray | None = None
    top_logprobs: np.ndarray | None = None
    full: np.ndarray | None = None


@dataclass(frozen=True)
class ClientTraits:
    """What the load driver and the runner need to know of how a sender's requests leave it (declared by the
    sender, never probed): an engine in the job's process has none of them."""

    pauses_gc: bool = False  # the measured phase runs with Python's cyclic collector paused (client_lag.pause_gc)
    kernel_stamps: bool = False  # its reads are stamped by the kernel (SO_TIMESTAMPNS), not in Python
    metrics_url: str | None = None  # the server's Prometheus /metrics, scraped beside the measured phase


class Handle(Protocol):
    """A started client process as its launcher knows it."""

    pid: int

    def exit_code(self) -> int | None: ...

    def last_words(self) -> str: ...

    def stop(self) -> None: ...


class Launcher(Protocol):
    """Starts ``n`` client processes; each comes with the socket the driver talks to it on (on this host:
    ``engine.backends.openai.launchers.LocalLauncher``; on Ray nodes: ``engine.jobs.ray_load.RayLauncher``,
    handed down by the job's process or the CLI, never imported from here)."""

    remote: bool  # on other hosts: settings carry the key and the tokenizer files; clocks are offset

    def launch(self, n: int, progress: Progress) -> list[tuple[socket.socket, Handle]]: ...

    def close(self) -> None: ...


LauncherFactory = Callable[[int], Launcher]  # load nodes -> the launcher that places client processes on them


class Sender(Protocol):
    """What the load driver drives (:mod:`engine.run.driver`): a loaded backend, or client processes sending for one.

    Subclass it to get the optional parts' defaults (an engine in this process: no traits, nothing to open ahead,
    no samples of its own)."""

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run ``coro`` to completion on the event loop this sender lives on (open from load to unload)."""
        ...

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        """Send one batch; stamp each record's ``send_ns`` as its request goes out and append every
        token-bearing chunk (``record.add_chunk``). A request-level failure is a :class:`RequestError`
        (the driver records it on that request); anything else ends the run as failed."""
        ...

    def traits(self) -> ClientTraits:
        """How its requests leave it (:class:`ClientTraits`); none for an engine in this process."""
        return ClientTraits()

    async def open_connections(self, n: int) -> None:
        """Open ``n`` connections before a phase whose requests are all due at once (an HTTP client); else nothing."""
        return None

    async def client_samples(self, start: bool) -> list[ClientSample]:
        """Client processes' own lag and CPU samples: start them (``start``) or collect them; none by default."""
        return []


class SenderPool(Sender, Protocol):
    """Client processes sending for a backend (``--client-processes``): a sender that is stopped after its phase."""

    def info(self) -> JSONObject:
        """What the processes said about themselves (pids, loops, nodes, clock offsets)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Backend(Sender, Protocol):
    """One inference engine. Instances are single-use: load, run(stream...), unload. Engines subclass it, so the
    optional parts (:class:`Sender`'s, :meth:`client_pool`) have their defaults."""

    name: str

    def load(self, model: ResolvedModel, recipe: EngineRecipe, device: str, progress: Progress) -> LoadReport: ...

    def tokenizer(self) -> Tokenizer | None:
        """The tokenizer, or None for synthetic weights."""
        ...

    def client_pool(self, n: int, progress: Progress, launcher: Launcher | None = None) -> SenderPool | None:
        """``n`` client processes sending for this backend (placed by ``launcher``, this host's by default), or None
        for an engine whose requests never leave the job's process (capability ``client_processes``)."""
        return None

    def info(self) -> JSONObject:
        """Versions and device facts for provenance."""
        ...

    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[TokenScores]:
        """Log-likelihoods of given token sequences under the loaded recipe (teacher forcing).

        One :class:`TokenScores` per sequence. ``top_k`` asks for the k best tokens per
        position, ``full`` for the whole log-softmax; a backend that cannot give them
        leaves those fields None and the accuracy figures that need them say so.
        """
        ...

    def measuring_started(self) -> None:
        """Called by the runner as the measured phase starts (after warm-up).

        Every counter the backend reports for the run restarts here, so each counts the
        measured phase only, for every engine: peak memory (CUDA), speculative-decoding
        draft/accepted tokens (transformers resets them; vLLM subtracts a snapshot).
        """
        ...

    def peak_memory(self) -> tuple[int | None, str] | None:
        """The measured phase's peak memory and what it is, where the engine knows it itself.

        ``(bytes, "cuda: max allocated during the measured phase")`` on CUDA; ``(None, why)``
        where no figure applies (a remote server); None: the runner's sampled RSS of the
        job's process tree stands (:mod:`engine.measure.memory`).
        """
        ...

    def serve_several_runs(self) -> None:
        """Called before :meth:`load` when the load will serve several runs of the recipe (capability
        ``runs_per_load``): what :meth:`between_runs` needs is set up with the engine (nothing by default)."""

    def between_runs(self) -> None:
        """Called before each run after the first on a load that serves several: what the last run left that
        would change the next one's figures (a prefix cache's blocks) is emptied; raises :class:`BackendError`
        when it cannot be (nothing to empty by default: a static batch keeps no state between calls)."""

    def unload(self) -> None: ...


def device_name(device: str) -> str:
    """The real name of a local device: the CPU model, or the GPU's NVML name.

    ``cuda:0,1`` of one kind reads ``2 x NVIDIA H200``; a GPU NVML does not see keeps its id.
    """
    from engine.measure.devices import cuda_devices
    from engine.measure.provenance import cpu_model
    from engine.spec.device import gpu_indices

    if device == "cpu":
        return cpu_model()
    by_index = {d.index: d.name for d in cuda_devices()}
    names = [by_index.get(i, f"cuda:{i}") for i in gpu_indices(device)]
    if len(set(names)) == 1:
        return names[0] if len(names) == 1 else f"{len(names)} x {names[0]}"
    return " + ".join(names)


def stamp_chunks(records: Sequence[RequestRecord]) -> Callable[[int, int, int], None]:
    """``chunk(row, t_ns, n_tokens)`` appending to ``records[row]``: the one chunk path of in-process batches."""
    chunk_ns = [r.chunk_ns for r in records]
    chunk_tokens = [r.chunk_tokens for r in records]

    def chunk(row: int, t_ns: int, n_tokens: int) -> None:
        chunk_ns[row].append(t_ns)
        chunk_tokens[row].append(n_tokens)

    return chunk


def get_backend(engine: str) -> Backend:
    """Instantiate the backend of the engine registered under ``engine`` (its descriptor names it; imports it now)."""
    from engine.spec import engines

    descriptor = engines.find(engine)
    if descriptor is None:
        raise BackendError(engines.unknown_engine(engine))
    module_name, class_name = descriptor.backend.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls()
    return backend
