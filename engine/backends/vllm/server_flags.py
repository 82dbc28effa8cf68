"""The managed vLLM server's ``extra_args``: an allow-list of harmless tuning flags (pure).

The job itself sets what the server listens on and serves (host, port, model, served
model name, no API key) and every recipe knob; ``extra_args`` may add only the flags
below, each checked against vLLM 0.32's ``vllm serve --help``. Nothing that changes
where the server listens, who may call it, what it loads, whether it runs code shipped
with the model (``--trust-remote-code`` is the recipe knob ``trust_remote_code``), or
what it logs or reads from disk. A flag that a recipe knob already sets is refused with
the knob's name, so the knob (and the run's fingerprint) says what ran.
"""

from __future__ import annotations

import re
import shlex

# flag -> whether it takes a value
ALLOWED_SERVER_FLAGS: dict[str, bool] = {
    "--seed": True,
    "--max-logprobs": True,
    "--long-prefill-token-threshold": True,
    "--max-num-scheduled-tokens": True,
    "--num-gpu-blocks-override": True,
    "--kv-cache-memory-bytes": True,
    "--cpu-offload-gb": True,
    "--max-cudagraph-capture-size": True,
    "--max-parallel-loading-workers": True,
    "--scheduling-policy": True,
    "--stream-interval": True,
    "--uvicorn-log-level": True,
    "--max-log-len": True,
    "--async-scheduling": False,
    "--no-async-scheduling": False,
    "--disable-cascade-attn": False,
    "--disable-custom-all-reduce": False,
    "--disable-uvicorn-access-log": False,
    "--disable-fastapi-docs": False,
    "--enable-prompt-tokens-details": False,
}

# flags a recipe knob sets (the knob to use instead)
KNOB_FLAGS: dict[str, str] = {
    "--dtype": "dtype",
    "--quantization": "quantization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--max-model-len": "max_model_len",
    "--enable-prefix-caching": "enable_prefix_caching",
    "--no-enable-prefix-caching": "enable_prefix_caching",
    "--enable-chunked-prefill": "enable_chunked_prefill",
    "--no-enable-chunked-prefill": "enable_chunked_prefill",
    "--block-size": "block_size",
    "--speculative-config": "speculative",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--enforce-eager": "enforce_eager",
    "--no-enforce-eager": "enforce_eager",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--trust-remote-code": "trust_remote_code",
    "--no-trust-remote-code": "trust_remote_code",
}

_VALUE = re.compile(r"^(?!--)[A-Za-z0-9._+-]{1,64}$")  # never another flag


class ServerFlagError(ValueError):
    """``extra_args`` that the managed server does not accept, in one line."""


ALLOWED_LIST = ", ".join(ALLOWED_SERVER_FLAGS)


def _refuse(token: str) -> ServerFlagError:
    flag = token.split("=", 1)[0]
    if flag in KNOB_FLAGS:
        why = f"{flag} is set by the recipe knob {KNOB_FLAGS[flag]} (use the knob)"
    elif not flag.startswith("-"):
        why = f"{flag!r} is not a flag"
    else:
        why = f"{flag} is not allowed"
    return ServerFlagError(f"{why}; extra_args takes only: {ALLOWED_LIST}")


def server_extra_argv(extra_args: str | None) -> list[str]:
    """``extra_args`` as argv tokens (``--flag value`` pairs, boolean flags alone); raises
    :class:`ServerFlagError` for anything outside :data:`ALLOWED_SERVER_FLAGS`."""
    try:
        tokens = shlex.split(extra_args or "")
    except ValueError as exc:
        raise ServerFlagError(f"cannot be split into arguments: {exc}") from exc
    argv: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(tokens):
        flag, eq, inline = tokens[i].partition("=")
        takes_value = ALLOWED_SERVER_FLAGS.get(flag)
        if takes_value is None or (eq and not takes_value):
            raise _refuse(tokens[i])
        if flag in seen:
            raise ServerFlagError(f"{flag} is given twice")
        seen.add(flag)
        argv.append(flag)
        i += 1
        if takes_value:
            value = inline if eq else (tokens[i] if i < len(tokens) else "")
            i += 0 if eq else 1
            if not _VALUE.match(value):
                raise ServerFlagError(f"{flag} needs a plain value (letters, digits, . _ + -), got {value!r}")
            argv.append(value)
    return argv
