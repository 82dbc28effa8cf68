"""Accuracy of the same recipe: perplexity against a hand computation, fidelity of the
reference to itself, a recipe that changes nothing, a damaging recipe, the baseline cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from engine.accuracy import baseline, scoring, sources
from engine.accuracy import evaluate as quality
from engine.backends.transformers.recipe import TransformersRecipe
from engine.spec import SpecError, parse_job_spec

BUDGET = 256  # corpus tokens: two windows of 128 keep these tests quick on 2 cores
WINDOW = 128


def _spec(metrics: list[str], **recipe: object):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", **recipe},
            "workload": {"prompt_tokens": 32, "output_tokens": 4, "requests": 2},
            "quality": {
                "metrics": metrics,
                "budget_tokens": BUDGET,
                "window": WINDOW,
                "flip_prompts": 2,
                "flip_tokens": 6,
            },
        }
    )


# -- pure parts ---------------------------------------------------------------------------
def test_windows_score_every_target_once():
    ids = list(range(1000))
    for window, stride in ((128, 128), (128, 64), (100, 1), (50, 37)):
        targets: list[int] = []
        for w in scoring.make_windows(ids, window, stride):
            first = w.tokens[0]
            assert len(w.tokens) <= window
            targets += [first + 1 + i for i in range(w.skip, len(w.tokens) - 1)]
        assert targets == sorted(set(targets)), "a target was scored twice"
        assert targets[-1] == 999
        if stride < window:
            assert targets == list(range(1, 1000))  # overlapping windows leave no gap


def test_kl_rows_is_zero_for_identical_and_positive_otherwise():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 50))
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    top = np.argsort(-logp, axis=1)[:, :8]
    base_lp = np.take_along_axis(logp, top, axis=1)
    assert np.all(scoring.kl_rows(top, base_lp, logp) == 0.0)
    other = logp + rng.normal(scale=0.5, size=logp.shape)
    other -= np.log(np.exp(other).sum(axis=1, keepdims=True))
    approx = scoring.kl_rows(top, base_lp, other)
    exact = np.sum(np.exp(logp) * (logp - other), axis=1)
    assert np.all(approx > 0) and np.all(approx <= exact + 1e-9)  # grouped KL is a lower bound
    full_k = np.argsort(-logp, axis=1)  # with every token kept it is the exact KL
    assert np.allclose(scoring.kl_rows(full_k, np.take_along_axis(logp, full_k, axis=1), other), exact)


def test_synthetic_weights_have_no_accuracy():
    with pytest.raises(SpecError, match="synthetic weights have no accuracy"):
        parse_job_spec({"model": {"source": "synthetic:smollm2-135m"}, "quality": {"metrics": ["ppl"]}})


def test_default_spec_has_no_quality_phase_and_keeps_its_fingerprint():
    plain = parse_job_spec({"model": {"source": "demo"}})
    assert not plain.quality.enabled
    assert plain.fingerprint() == "1b1512eb5d8b99b6"  # the default demo spec's fingerprint before quality existed
    assert (
        _spec(["ppl"]).fingerprint()
        != parse_job_spec({"model": {"source": "demo"}, "workload": _spec(["ppl"]).workload.model_dump()}).fingerprint()
    )


def test_preflight_refuses_a_missing_corpus_file(tmp_path: Path):
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "corpus": str(tmp_path / "missing.txt")}}
    )
    with pytest.raises(SpecError, match="is not a file"):
        quality.check(spec)


# -- with the demo model ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def resolved(demo_folder):
    from engine.weights import models

    return models.resolve(parse_job_spec({"model": {"source": "demo"}}).model)


def _load(resolved, recipe):
    from engine.backends.base import get_backend

    backend = get_backend("transformers")
    backend.load(resolved, recipe, "cpu", lambda _m, _f: None)
    return backend


@pytest.fixture(scope="module")
def reference(resolved):
    backend = _load(resolved, TransformersRecipe())
    yield backend
    backend.unload()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(baseline, "cache_dir", lambda: tmp_path / "quality")
    return tmp_path / "quality"


def _prompts(backend, spec):
    from engine.run.sources.synthetic import synthetic_prompts

    return synthetic_prompts(spec.workload.traffic, spec.workload.seed, 2, backend.tokenizer(), 49152)


@pytest.mark.slow
def test_perplexity_equals_a_hand_computation(reference, demo_folder, cache):
    import torch
    from transformers import AutoModelForCausalLM

    spec = _spec(["ppl"])
    result = quality.evaluate(spec, reference, None, _prompts(reference, spec), log=lambda _m: None)
    text, _ = sources.corpus_text("default")
    ids = reference.tokenizer().encode(text, add_special_tokens=False)[:BUDGET]
    model = AutoModelForCausalLM.from_pretrained(str(demo_folder), dtype=torch.float32)
    total, count = 0.0, 0
    with torch.no_grad():
        for begin in range(0, BUDGET, WINDOW):  # non-overlapping windows, as the default stride
            chunk = torch.tensor([ids[begin : begin + WINDOW]])
            logits = model(chunk).logits[0].double()
            for i in range(chunk.shape[1] - 1):
                row = logits[i]
                total -= float(row[chunk[0, i + 1]] - torch.logsumexp(row, dim=0))
                count += 1
    assert result["perplexity_tokens"] == count
    assert result["perplexity"] == pytest.approx(math.exp(total / count), rel=1e-4)
    assert "kl_mean" not in result and result["corpus"].startswith("default")


@pytest.mark.slow
def test_reference_is_faithful_to_itself_and_cached_once(reference, resolved, cache):
    spec = _spec(["ppl", "fidelity"])
    loads = []

    def load_reference():
        loads.append(1)
        return _load(resolved, TransformersRecipe())

    first = quality.evaluate(
        spec, reference, resolved, _prompts(reference, spec), log=lambda _m: None, load_reference=load_reference
    )
    assert first["kl_mean"] == pytest.approx(0.0, abs=1e-9) and first["kl_p99"] == pytest.approx(0.0, abs=1e-9)
    assert first["top1_agreement"] == 1.0 and first["greedy_flip_rate"] == 0.0
    assert first["greedy_flip_tokens"] == 12 and first["baseline_cached"] is False
    assert first["baseline_perplexity"] == pytest.approx(first["perplexity"])
    assert first["reference"] == quality.reference_label(spec)  # what "vs reference" means, in words
    assert loads == []  # the reference recipe builds its own baseline from its pass
    assert len(list(cache.glob("*.npz"))) == 1

    # A recipe that changes nothing (float32 is what auto means on the CPU) is another
    # recipe: it reuses the cached baseline and matches it.
    same = _load(resolved, TransformersRecipe(dtype="float32"))
    try:
        spec32 = _spec(["ppl", "fidelity"], dtype="float32")
        again = quality.evaluate(
            spec32, same, resolved, _prompts(same, spec32), log=lambda _m: None, load_reference=load_reference
        )
    finally:
        same.unload()
    assert loads == [] and again["baseline_cached"] is True
    assert again["kl_mean"] < 1e-6 and again["top1_agreement"] == 1.0 and again["greedy_flip_rate"] == 0.0
    assert again["perplexity"] == pytest.approx(first["perplexity"], rel=1e-5)


@pytest.mark.slow
def test_a_damaging_recipe_scores_visibly_worse(reference, resolved, cache):
    base = quality.evaluate(
        _spec(["ppl", "fidelity"]), reference, resolved, _prompts(reference, _spec(["ppl"])), log=lambda _m: None
    )
    layers = reference._model.config.num_hidden_layers  # the loaded config
    spec = _spec(["ppl", "fidelity"], drop_layers=layers // 2)
    damaged = _load(resolved, spec.recipe)
    try:
        worse = quality.evaluate(
            spec,
            damaged,
            resolved,
            _prompts(damaged, spec),
            log=lambda _m: None,
            load_reference=lambda: pytest.fail("the baseline should be cached"),
        )
    finally:
        damaged.unload()
    assert worse["perplexity"] > 2 * base["perplexity"]
    assert worse["kl_mean"] > 0.5
    assert worse["top1_agreement"] < 0.8
    assert worse["greedy_flip_rate"] > 0.1


class _NoScoring:
    """A backend whose score() must not be called."""

    name = "transformers"

    def tokenizer(self):
        return _AsciiTokenizer()

    def score(self, *_a, **_k):
        pytest.fail("a quantized-KV-cache recipe was scored with full forward passes")


def test_quantized_kv_cache_recipes_report_no_accuracy(tmp_path: Path):
    task = tmp_path / "t.jsonl"
    task.write_text('{"prompt": "1, 2, 3,", "choices": [" 4", " 9"], "answer": 0}\n', encoding="utf-8")
    spec = _spec(["ppl", "fidelity", f"task:{task}"], kv_cache_quantization="quanto_int4")
    result = quality.evaluate(spec, _NoScoring(), None, [], log=lambda _m: None)
    assert result["notes"]["accuracy"].startswith("not measured: the quantized KV cache acts only during generation")
    assert "would be those of the unquantized cache" in result["notes"]["accuracy"]
    figures = [k for k in result if k not in ("notes", "timings_s")]
    assert figures == []  # no perplexity, KL, top-1, flips or task accuracy to plot or summarise
    assert quality.summary_line(result).startswith("accuracy: not measured")
    from engine.measure import registry

    assert not any(registry.is_metric(f"quality.{k}") for k in result)


def test_the_reference_recipe_says_what_it_is():
    assert quality.reference_label(_spec(["ppl"])) == (
        "default recipe of this engine (for the demo: the Q4_1 GGUF dequantized to float32)"
    )
    other = parse_job_spec({"model": {"source": "org/name"}, "quality": {"metrics": ["fidelity"]}})
    assert "native precision" in quality.reference_label(other)


def test_a_gptq_recipe_records_its_calibration_text(tmp_path: Path, cache):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20, encoding="utf-8")
    quality_spec = {"metrics": ["ppl"], "corpus": str(corpus), "budget_tokens": 100, "window": 64}
    recipes = {"engine": "transformers", "quantization": "gptq"}
    spec = parse_job_spec({"model": {"source": "demo"}, "recipe": recipes, "quality": quality_spec})
    result = quality.evaluate(spec, _BigramBackend("transformers", True), None, [], log=lambda _m: None)
    assert result["calibration"].startswith("default corpus") and "calibration part (chars " in result["calibration"]
    assert "calibration" not in result.get("notes", {})
    same = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {**recipes, "gptq_calibration_file": str(corpus)},
            "quality": quality_spec,
        }
    )
    result = quality.evaluate(same, _BigramBackend("transformers", True), None, [], log=lambda _m: None)
    assert result["calibration"] == str(corpus)
    assert "calibrated on this corpus file" in result["notes"]["calibration"]


def test_run_page_accuracy_section_renders():
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        from types import SimpleNamespace

        from ui.accuracy_view import render_accuracy

        render_accuracy(
            SimpleNamespace(
                spec={"model": {"source": "demo"}},
                quality={
                    "perplexity": 20.35,
                    "perplexity_tokens": 2044,
                    "perplexity_stderr": 1.3,
                    "corpus": "default",
                    "kl_mean": 0.0123,
                    "kl_p99": 0.2,
                    "top1_agreement": 0.97,
                    "greedy_flip_rate": 0.02,
                    "greedy_flip_tokens": 64,
                    "baseline_perplexity": 20.1,
                    "baseline_cached": True,
                    "reference": "default recipe of this engine (for the demo: the Q4_1 GGUF dequantized to float32)",
                    "task:counting": 0.75,
                    "task:counting:stderr": 0.1,
                    "task:counting:n": 12,
                    "task:counting:kind": "multiple choice",
                    "notes": {"task:hellaswag": "unavailable here"},
                },
            )
        )
        render_accuracy(SimpleNamespace(spec={"model": {"source": "synthetic:smollm2-135m"}}, quality=None))

    at = AppTest.from_function(page, default_timeout=30).run()
    assert not at.exception
    values = [m.value for m in at.metric]
    assert "20.35" in values and "97.0%" in values and "2.0%" in values
    assert at.dataframe[0].value["task"].tolist() == ["counting"]
    assert "unavailable here" in at.info[0].value
    assert any("Reference: default recipe of this engine (for the demo: the Q4_1 GGUF" in c.value for c in at.caption)
    assert any("synthetic" in c.value for c in at.caption)


class _AsciiTokenizer:
    eos_token_id = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) % 128 for c in text]


class _BigramBackend:
    """An engine without full distributions: a fixed bigram model, like vLLM's
    prompt_logprobs (top-k only, ``top=True``) or an endpoint's echo (``top=False``)."""

    def __init__(self, name: str, top: bool) -> None:
        self.name, self.top = name, top
        logits = np.random.default_rng(1).normal(scale=3.0, size=(128, 128))
        self.logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    def tokenizer(self):
        return _AsciiTokenizer()

    def info(self):
        return {"engine": self.name}

    def score(self, sequences, top_k=0, full=False):
        from engine.backends.base import BackendError, TokenScores

        if full and not self.top:
            raise BackendError("full next-token distributions are not available over the OpenAI API")
        out = []
        for seq in sequences:
            rows = self.logp[np.asarray(seq[:-1])]
            lps = rows[np.arange(len(seq) - 1), np.asarray(seq[1:])].astype(np.float32)
            top_ids = top_lps = None
            if self.top and top_k:
                top_ids = np.argsort(-rows, axis=1)[:, :top_k]
                top_lps = np.take_along_axis(rows, top_ids, axis=1).astype(np.float32)
            out.append(TokenScores(token_logprobs=lps, top_ids=top_ids, top_logprobs=top_lps))
        return out


@pytest.mark.parametrize("top", [True, False])
def test_engines_without_full_distributions_keep_what_they_can(tmp_path: Path, cache, top: bool):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20, encoding="utf-8")
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "quality": {
                "metrics": ["ppl", "fidelity"],
                "corpus": str(corpus),
                "budget_tokens": 300,
                "window": 64,
                "flip_prompts": 2,
                "flip_tokens": 3,
            },
        }
    )
    backend = _BigramBackend("vllm" if top else "openai", top)
    prompts = [[ord(c) for c in "hello world"], [ord(c) for c in "latency lab"]]
    result = quality.evaluate(spec, backend, None, prompts, log=lambda _m: None)
    lps = backend.score([_AsciiTokenizer().encode(corpus.read_text())[:300]])[0].token_logprobs
    assert result["perplexity_tokens"] == 300 - 5  # 5 windows of 64 tokens (the last one 44) lose one target each
    assert result["perplexity"] > 1 and result["perplexity"] < math.exp(-lps.min())
    assert "kl_mean" not in result and "unavailable" in result["notes"]["kl" if top else "fidelity"]
    if top:
        assert result["top1_agreement"] == 1.0 and result["greedy_flip_rate"] == 0.0
        assert result["greedy_flip_tokens"] == 6
    else:
        assert "top1_agreement" not in result


def test_an_unreachable_hub_dataset_is_reported_not_raised(cache, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "corpus": "hf:latencylab-nonexistent/corpus"}}
    )
    quality.check(spec)  # the shape is fine; reachability is only known when it runs
    result = quality.evaluate(spec, _BigramBackend("vllm", True), None, [], log=lambda _m: None)
    assert "perplexity" not in result
    assert result["notes"]["corpus"].startswith("cannot load latencylab-nonexistent/corpus from the Hugging Face hub")
    with pytest.raises(SpecError, match="needs a dataset name"):
        parse_job_spec({"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "corpus": "hf:"}})
