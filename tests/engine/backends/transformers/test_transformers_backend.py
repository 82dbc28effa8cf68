"""The transformers backend on the CPU with the real demo model and synthetic weights."""

from __future__ import annotations

import pytest

from engine.backends.base import BackendError, Request, get_backend
from engine.backends.transformers.recipe import TransformersRecipe
from engine.measure.records import RequestRecord
from engine.spec import ModelSpec
from engine.weights.models import resolve

pytestmark = pytest.mark.slow


def stream(backend, prompts, max_new_tokens, **kw):
    """One batch through the streaming contract; the records it filled."""
    lengths = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * len(prompts)
    batch = [Request(prompt=p, max_new_tokens=n, **kw) for p, n in zip(prompts, lengths, strict=True)]
    records = [RequestRecord(index=i, arrival_ns=0, send_ns=0, prompt_tokens=len(p)) for i, p in enumerate(prompts)]
    backend.run(backend.stream(batch, records))
    return records


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
    prompts = [[1, 2, 3, 4, 5], [6, 7, 8]]  # different lengths: left padding
    records = stream(backend, prompts, 6)
    for rec in records:
        assert len(rec.chunk_ns) == 6  # fixed length: no early EOS
        assert rec.chunk_ns == sorted(rec.chunk_ns) and rec.chunk_ns[0] > rec.send_ns > 0
        assert rec.chunk_tokens == [1] * 6


def test_each_row_of_a_batch_ends_at_its_own_length_and_can_return_its_text(demo_backend):
    backend, _ = demo_backend
    records = stream(backend, [[1, 2, 3, 4, 5], [6, 7, 8]], [2, 5], want_text=True)
    assert [r.output_tokens for r in records] == [2, 5]
    assert records[0].chunk_ns[-1] < records[1].chunk_ns[-1]  # the short row is done first
    assert all(isinstance(r.text, str) and r.text for r in records)


def test_synthetic_weights_need_no_tokenizer():
    backend = get_backend("transformers")
    resolved = resolve(ModelSpec(source="synthetic:smollm2-135m"))
    report = backend.load(resolved, TransformersRecipe(), "cpu", lambda *_: None)
    try:
        assert backend.tokenizer() is None and report.vocab_size == 49152
        (rec,) = stream(backend, [[5] * 8], 3)
        assert len(rec.chunk_ns) == 3
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
