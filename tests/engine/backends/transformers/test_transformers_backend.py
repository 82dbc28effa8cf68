"""The transformers backend on the CPU with the real demo model and synthetic weights."""

from __future__ import annotations

import pytest

from engine.backends.base import BackendError, GenerationParams, get_backend
from engine.backends.transformers.recipe import TransformersRecipe
from engine.spec import ModelSpec
from engine.weights.models import resolve

pytestmark = pytest.mark.slow


class Collect:
    def __init__(self):
        self.chunks = []

    def chunk(self, row, t_ns, n_tokens):
        self.chunks.append((row, t_ns, n_tokens))


@pytest.fixture(scope="module")
def demo_backend(demo_folder):
    backend = get_backend("transformers")
    report = backend.load(resolve(ModelSpec(source="demo")), TransformersRecipe(), "cpu", lambda *_: None)
    yield backend, report
    backend.unload()


def test_load_reports_what_ran(demo_backend):
    backend, report = demo_backend
    assert report.applied["dtype"] == "float32"  # auto on the CPU
    assert report.applied["attn_implementation"] == "sdpa"
    assert 130_000_000 < report.parameters < 140_000_000
    assert report.context_length == 8192
    info = backend.info()
    assert info["engine"] == "transformers" and info["torch"] and info["transformers"]
    assert info["device_name"]


def test_every_row_gets_a_stamp_per_token(demo_backend):
    backend, _ = demo_backend
    sink = Collect()
    prompts = [[1, 2, 3, 4, 5], [6, 7, 8]]  # different lengths: left padding
    send_ns = backend.generate(prompts, GenerationParams(max_new_tokens=6), sink)
    for row in (0, 1):
        stamps = [t for r, t, _ in sink.chunks if r == row]
        assert len(stamps) == 6  # fixed length: no early EOS
        assert stamps == sorted(stamps) and stamps[0] > send_ns
    assert all(n == 1 for _, _, n in sink.chunks)


def test_synthetic_weights_need_no_tokenizer():
    backend = get_backend("transformers")
    resolved = resolve(ModelSpec(source="synthetic:smollm2-135m"))
    report = backend.load(resolved, TransformersRecipe(), "cpu", lambda *_: None)
    try:
        assert backend.tokenizer() is None and report.vocab_size == 49152
        sink = Collect()
        backend.generate([[5] * 8], GenerationParams(max_new_tokens=3), sink)
        assert len(sink.chunks) == 3
    finally:
        backend.unload()


def test_cuda_request_on_a_cpu_machine_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    backend = get_backend("transformers")
    with pytest.raises(BackendError, match="CUDA is not available"):
        backend.load(
            resolve(ModelSpec(source="synthetic:smollm2-135m")), TransformersRecipe(), "cuda:0", lambda *_: None
        )


def test_unknown_engine():
    with pytest.raises(BackendError, match="unknown engine"):
        get_backend("nope")
