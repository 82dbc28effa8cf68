"""The openai engine's light path: a whole run imports neither torch nor transformers (issue 24)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fake_openai import fake_server

REPO = Path(__file__).resolve().parents[4]
HEAVY = ("torch", "transformers", "vllm", "aiohttp", "sklearn", "accelerate")

_RUN = """
import json, sys
from engine.cli.main import main
code = main(sys.argv[1:])
heavy = sorted(m for m in {HEAVY} if m in sys.modules)
from engine.backends.openai.tokenizer import FastTokenizer
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def test_a_one_request_openai_run_imports_neither_torch_nor_transformers(demo_folder, tmp_path) -> None:
    with fake_server() as server:
        args = [
            "run", "--db", f"sqlite:///{tmp_path / 'light.db'}", "--model", "demo", "--engine", "openai",
            "--served-model", "fake", "--base-url", server.base_url, "--requests", "1", "--output-tokens", "4",
            "--accuracy", "none", "--json",
        ]  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", _RUN.format(HEAVY=HEAVY), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        sent = [b.get("prompt") for b in server.seen.bodies]
    verdict = json.loads(proc.stderr.strip().splitlines()[-1])
    assert verdict == {"code": 0, "heavy": []}, proc.stderr[-2000:]
    obj = json.loads(proc.stdout)
    assert obj["status"] == "done" and obj["completed"] == 1
    assert obj["provenance"]["tokenizer"] == "FastTokenizer" and obj["provenance"]["event_loop"].startswith("uvloop")
    assert all(isinstance(p, str) and p for p in sent)  # prompts went as text, decoded by the light tokenizer
