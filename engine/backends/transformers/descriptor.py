"""The transformers engine as LatencyLab sees it outside its backend (pure data; see :mod:`engine.spec.descriptor`)."""

from __future__ import annotations

from engine.backends.transformers import rules
from engine.backends.transformers.presets import RECIPE_PRESETS
from engine.backends.transformers.recipe import TransformersRecipe
from engine.spec.descriptor import Capabilities, EngineDescriptor, FormGroups, Search, ServingModel, WhatIf

LABELS = {
    "dtype": "Precision (dtype)",
    "attn_implementation": "Attention kernel",
    "quantization": "Weight quantization",
    "gptq_bits": "GPTQ bits per weight",
    "gptq_group_size": "GPTQ group size (weights; -1 per column)",
    "gptq_desc_act": "GPTQ act-order (columns by decreasing activation)",
    "gptq_calibration_file": "GPTQ calibration text file",
    "cache_implementation": "KV cache",
    "compile": "torch.compile",
    "compile_mode": "Compile mode",
    "kv_cache_quantization": "KV cache quantization",
    "speculative": "Speculative decoding",
    "prompt_lookup_ngram": "Prompt-lookup n-gram size (tokens)",
    "num_speculative_tokens": "Draft tokens per step",
    "assistant_model": "Assistant (draft) model",
    "early_exit_layer": "Early-exit draft layers",
    "drop_layers": "Layers dropped",
    "drop_layers_from": "Drop layers from",
    "batching": "Batching",
    "tensor_parallel": "Tensor parallel",
    "tensor_parallel_ranks": "Tensor-parallel processes",
    "sliding_window": "Sliding window (tokens)",
    "cpu_threads": "CPU threads",
    "trust_remote_code": "Trust remote code (runs the model's own Python)",
}
FORM = FormGroups(
    basic=(
        "dtype",
        "quantization",
        "gptq_bits",
        "gptq_group_size",
        "gptq_desc_act",
        "gptq_calibration_file",
        "speculative",
        "prompt_lookup_ngram",
        "num_speculative_tokens",
        "assistant_model",
        "early_exit_layer",
        "drop_layers",
        "drop_layers_from",
        "batching",
    ),
    shown_with=(("cpu_threads", lambda v: v["_device"] == "cpu", "the CPU"),),
    labels=LABELS,
    device_choices=True,
    # a knob that only matters with another one is checked with it set
    enablers={
        "compile_mode": {"compile": True, "cache_implementation": "static"},
        "gptq_bits": {"quantization": "gptq"},
        "gptq_desc_act": {"quantization": "gptq"},
        "drop_layers_from": {"drop_layers": 1},
    },
    # a value that only makes sense with a companion gets that companion for the check
    companions={
        ("compile", True): {"cache_implementation": "static"},
        ("speculative", "assistant"): {"assistant_model": "demo"},
        ("speculative", "early_exit"): {"early_exit_layer": 4},
        ("quantization", "torchao_int4_weight_only"): {"dtype": "bfloat16"},
    },
)
# Priors of the what-if estimator, used until calibration replaces them ("uncalibrated"); the runs they come
# from ship with their source in engine/whatif/priors_h200.json (engine/whatif/explain.py names them). The GPU
# overheads are from FIELD-NOTES (H200, eager, batch 1, 512-token prompt): decode steps of 51 ms
# (Llama-3.2-1B) and 59 ms (Llama-3-8B) against bandwidth floors of 0.58 and 3.77 ms (launch-bound:
# ~50 ms per step on top), and a TTFT of 27 and 24 ms whatever the prefill's FLOPs (one pass of
# launches, ~25 ms, overlapping the kernels).
PRIORS = {
    "gpu": {
        "eff_bandwidth": 0.7,
        "eff_compute_prefill": 0.5,
        "eff_compute_decode": 0.3,
        "step_overhead_ms": 50.0,
        "prefill_overhead_ms": 25.0,
    },
    "cpu": {
        "eff_bandwidth": 0.5,
        "eff_compute_prefill": 0.5,
        "eff_compute_decode": 0.5,
        "step_overhead_ms": 10.0,
        "prefill_overhead_ms": 10.0,
    },
}

DESCRIPTOR = EngineDescriptor(
    name="transformers",
    recipe=TransformersRecipe,
    summary="Hugging Face transformers in the job's process: every recipe knob, static batches (eager, launch-bound)",
    backend="engine.backends.transformers.backend:TransformersBackend",
    preflight="engine.backends.transformers.preflight:check",
    capabilities=Capabilities(profiles=True, full_distributions=True, tensor_parallel=True, runs_per_load=True),
    knob_dependencies=rules.DEPENDENCIES,
    form=FORM,
    search=Search(
        knobs=("dtype", "quantization", "drop_layers", "speculative", "attn_implementation"),
        values={
            "drop_layers": (0, 2, 4, 8),
            "num_speculative_tokens": (3, 5, 10),
            "prompt_lookup_ngram": (2, 3, 4),
            "gptq_group_size": (128, 64, -1),
            "early_exit_layer": (4, 8, 12),
        },
    ),
    whatif=WhatIf(
        family="transformers",
        priors=PRIORS,
        serving=ServingModel(
            batching="static",  # model.generate serves one static batch to its end
            priors={
                "gpu": {"step_s": 3e-2, "seq_s": 1e-4, "arrival_s": 1e-3, "eff_bandwidth": 0.7, "eff_compute": 0.5},
                "cpu": {"step_s": 2e-2, "seq_s": 1e-3, "arrival_s": 5e-3, "eff_bandwidth": 0.6, "eff_compute": 0.4},
            },
            modelled={"batching": "static"},
        ),
    ),
    # knobs added after the first runs were stored: at their defaults they stay out of fingerprints
    fingerprint_defaults={
        name: info.default
        for name, info in TransformersRecipe.model_fields.items()
        if name not in ("engine", "dtype", "attn_implementation")
    },
    presets=RECIPE_PRESETS,
    packages=("torch", "transformers", "accelerate", "torchao"),
    versions=("torch", "transformers"),
)
