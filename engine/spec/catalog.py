"""Architecture configs for synthetic (random-weight) models.

Each entry is the keyword arguments of the Hugging Face config class named by
``model_type``, copied from the model's published ``config.json``. Speed does not
depend on weight values, so these measure models nobody has downloaded; they are
also the architecture catalog of the what-if estimator.
"""

from __future__ import annotations

from engine.jsonvalue import JSONObject

SYNTHETIC_ARCHITECTURES: dict[str, JSONObject] = {
    "smollm2-135m": {
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
        "source": "HuggingFaceTB/SmolLM2-135M-Instruct config.json",
    },
    "llama-3.2-1b": {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
        "source": "meta-llama/Llama-3.2-1B config.json",
    },
    "llama-3-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "source": "meta-llama/Meta-Llama-3-8B config.json",
    },
    "llama-3-70b": {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "source": "meta-llama/Meta-Llama-3-70B config.json",
    },
    "qwen2.5-7b": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "source": "Qwen/Qwen2.5-7B config.json",
    },
    "mistral-7b": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "source": "mistralai/Mistral-7B-v0.1 config.json",
    },
}


def architecture_config(name: str) -> JSONObject:
    """The config kwargs of a catalog architecture (without the ``source`` note)."""
    entry = dict(SYNTHETIC_ARCHITECTURES[name])
    entry.pop("source", None)
    return entry


def parameter_count(name: str) -> int:
    """Parameters of a catalog architecture, counted from its shape (llama-like blocks)."""
    c = SYNTHETIC_ARCHITECTURES[name]
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    head_dim = c.get("head_dim", h // heads)
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    if c["model_type"] == "qwen2":  # q, k, v projections carry biases
        attn += heads * head_dim + 2 * kv * head_dim
    mlp = 3 * h * inter
    norms = 2 * h
    embed = c["vocab_size"] * h
    head = 0 if c.get("tie_word_embeddings") else embed
    return layers * (attn + mlp + norms) + embed + head + h
