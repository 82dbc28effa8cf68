"""Model shapes for the what-if estimator: what it needs from an architecture config.

Pure: a config dict, ``demo``, ``synthetic:<arch>`` or a local folder's config.json in,
a :class:`ModelShape` out; no weights, no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.spec.catalog import SYNTHETIC_ARCHITECTURES, architecture_config, parameter_count

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject


class EstimateError(ValueError):
    """Input the estimator cannot use; the message is one line and says what would work."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimator needs from an architecture config."""

    name: str
    model_type: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    max_positions: int | None
    sliding_window: int | None
    params: int

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection (the embedding when tied): a matmul every token."""
        return self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """Parameters in the per-layer matmuls (attention projections and MLP)."""
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return self.layers * (attn + 3 * self.hidden * self.intermediate)

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes

    def dropped(self, n: int) -> ModelShape:
        """The shape after removing ``n`` decoder layers (their matmuls and two norms each)."""
        if n == 0:
            return self
        if not 0 < n < self.layers:
            raise EstimateError(
                f"dropping {n} layers of {self.name}'s {self.layers} leaves none (drop 0 to {self.layers - 1})"
            )
        per_layer = self.linear_params // self.layers + 2 * self.hidden
        return replace(self, layers=self.layers - n, params=self.params - n * per_layer)


def _count_params(c: JSONMapping) -> int:
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or h // heads
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    if c.get("model_type") == "qwen2" or c.get("attention_bias"):
        attn += heads * head_dim + 2 * kv * head_dim
    embed = c["vocab_size"] * h
    head = 0 if c.get("tie_word_embeddings") else embed
    return layers * (attn + 3 * h * inter + 2 * h) + embed + head + h


def shape_from_config(config: JSONMapping, name: str = "config") -> ModelShape:
    """A :class:`ModelShape` from HF ``config.json`` keys (llama-like decoders)."""
    c = dict(config.get("text_config") or config)
    if c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts"):
        raise EstimateError(f"{name}: mixture-of-experts configs are not supported by the estimator yet")
    missing = [
        k
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        if not isinstance(c.get(k), int) or c.get(k) <= 0
    ]
    if missing:
        raise EstimateError(f"{name}: config lacks {', '.join(missing)} (needs a llama-like decoder config)")
    heads = c["num_attention_heads"]
    head_dim = c.get("head_dim") or c["hidden_size"] // heads
    window = c.get("sliding_window") if c.get("use_sliding_window", True) else None
    return ModelShape(
        name=name,
        model_type=str(c.get("model_type", "llama")),
        layers=c["num_hidden_layers"],
        hidden=c["hidden_size"],
        intermediate=c["intermediate_size"],
        heads=heads,
        kv_heads=c.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        vocab=c["vocab_size"],
        tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_positions=c.get("max_position_embeddings"),
        sliding_window=window if isinstance(window, int) else None,
        params=_count_params(c),
    )


def model_shape(model: str | JSONObject) -> ModelShape:
    """Shape of ``demo``, ``synthetic:<arch>``, a local folder with config.json, or a config dict."""
    if isinstance(model, dict):
        return shape_from_config(model, str(model.get("_name_or_path") or "config"))
    source = model.strip()
    if source == "demo":  # SmolLM2-135M-Instruct: the catalog's smollm2-135m architecture
        shape = shape_from_config(architecture_config("smollm2-135m"), "demo (SmolLM2-135M-Instruct)")
        return replace(shape, params=parameter_count("smollm2-135m"))
    if source.startswith("synthetic:"):
        arch = source.split(":", 1)[1]
        if arch not in SYNTHETIC_ARCHITECTURES:
            raise EstimateError(
                f"unknown architecture {arch!r}; choose one of: {', '.join(sorted(SYNTHETIC_ARCHITECTURES))}"
            )
        return replace(shape_from_config(architecture_config(arch), source), params=parameter_count(arch))
    path = Path(source).expanduser()
    cfg_file = path / "config.json" if path.is_dir() else path
    if cfg_file.name == "config.json" and cfg_file.is_file():
        try:
            data = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise EstimateError(f"cannot read {cfg_file}: {exc}") from exc
        if not isinstance(data, dict):
            raise EstimateError(f"{cfg_file} does not hold a JSON object")
        return shape_from_config(data, source)
    raise EstimateError(
        f"model {source!r} is not 'demo', 'synthetic:<arch>' ({', '.join(sorted(SYNTHETIC_ARCHITECTURES))}) "
        "or a local folder with config.json"
    )
