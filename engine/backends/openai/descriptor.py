"""An OpenAI-compatible server as LatencyLab sees it outside its backend (pure data; see :mod:`engine.spec.descriptor`)."""

from __future__ import annotations

from engine.backends.openai import rules
from engine.backends.openai.recipe import OpenAIRecipe
from engine.spec.descriptor import Capabilities, EngineDescriptor, FormGroups, WhatIf

DESCRIPTOR = EngineDescriptor(
    name="openai",
    recipe=OpenAIRecipe,
    summary="any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp ...) the job does not manage, over HTTP",
    backend="engine.backends.openai.backend:OpenAIBackend",
    preflight="engine.backends.openai.preflight:check",
    capabilities=Capabilities(serving=True, server_metrics=True, remote=True, client_processes=True),
    knob_dependencies=rules.DEPENDENCIES,
    form=FormGroups(
        basic=("base_url", "model_name", "endpoint", "api_key_env"),
        labels={
            "base_url": "Server base URL",
            "model_name": "Model name on the server",
            "endpoint": "API endpoint",
            "api_key_env": "API key environment variable (its name)",
            "send_ignore_eos": "Send ignore_eos (fixed output lengths)",
            "timeout_s": "Request timeout (s)",
            "max_model_len": "Server's context length (tokens)",
        },
    ),
    fingerprint_defaults={"max_model_len": None},  # runs stored before the knob keep their fingerprints
    whatif=WhatIf(calibrates=False, left_out="served over HTTP"),
)
