"""Small generated inputs for benchmarks/simulator_accuracy.py: an Azure-format trace, a Mooncake-format trace
with shared hash ids, and a ShareGPT-like dataset of multi-turn conversations. Seeded: the same files
every time (written once into a folder, kept if already there with the same content).

Formats as engine/data/trace_formats.py reads them: Azure LLM inference CSV (``TIMESTAMP`` as
``YYYY-MM-DD HH:MM:SS.fffffff``, ``ContextTokens``, ``GeneratedTokens``); Mooncake JSONL (``timestamp`` in
ms, ``input_length``, ``output_length``, ``hash_ids``: one id per 512-token block, equal ids equal blocks);
ShareGPT JSON (``[{"conversations": [{"from": "human" | "gpt", "value": ...}, ...]}, ...]``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

WORDS = (
    "latency throughput batch token cache prefix decode prefill server engine request reply model weight "
    "memory bandwidth compute queue schedule block chunk stream client kernel tensor layer head attention "
    "window budget preempt recompute measure predict calibrate error band hardware device"
).split()


def _write(path: Path, text: str) -> Path:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def azure_trace(folder: Path, rows: int = 160, rate: float = 0.8, seed: int = 1) -> Path:
    """An Azure-format CSV: Poisson arrivals at ``rate``/s, context 32-640 tokens (log-normal), 8-64 generated."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2023, 11, 16, 18, 0, 0)
    at = np.cumsum(rng.exponential(1 / rate, rows))
    context = np.clip(rng.lognormal(np.log(160), 0.6, rows), 32, 640).astype(int)
    generated = rng.integers(8, 65, rows)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, c, g in zip(at, context, generated, strict=True):
        stamp = (t0 + timedelta(seconds=float(t))).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
        lines.append(f"{stamp},{c},{g}")
    return _write(folder / "azure_window.csv", "\n".join(lines) + "\n")


def mooncake_trace(folder: Path, rows: int = 40, mean_gap_s: float = 3.0, groups: int = 6, seed: int = 2) -> Path:
    """A Mooncake-format JSONL: each prompt 520-1000 tokens, its first 512-token block one of ``groups`` shared
    ones (equal hash ids), the rest its own; 16-32 output tokens; Poisson gaps of ``mean_gap_s``."""
    rng = np.random.default_rng(seed)
    at_ms = np.cumsum(rng.exponential(mean_gap_s * 1000, rows)).astype(int)
    lines = []
    for i, t in enumerate(at_ms):
        length = int(rng.integers(520, 1001))
        ids = [int(rng.integers(0, groups)), 1000 + i]
        out = int(rng.integers(16, 33))
        lines.append(json.dumps({"timestamp": int(t), "input_length": length, "output_length": out, "hash_ids": ids}))
    return _write(folder / "mooncake_shared.jsonl", "\n".join(lines) + "\n")


def _sentence(rng: np.random.Generator, words: int) -> str:
    return " ".join(str(w) for w in rng.choice(WORDS, size=words)).capitalize() + "."


def sharegpt_sessions(folder: Path, conversations: int = 16, turns: int = 3, seed: int = 3) -> Path:
    """A ShareGPT-like JSON: ``conversations`` conversations of ``turns`` user turns (30-60 words) and replies."""
    rng = np.random.default_rng(seed)
    data = []
    for _ in range(conversations):
        conv = []
        for _ in range(turns):
            conv.append({"from": "human", "value": _sentence(rng, int(rng.integers(30, 61)))})
            conv.append({"from": "gpt", "value": _sentence(rng, int(rng.integers(15, 30)))})
        data.append({"conversations": conv})
    return _write(folder / "sessions_sharegpt.json", json.dumps(data, indent=1) + "\n")
