"""Each knob function on tiny random models (fast); CUDA-only knobs are marked gpu."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.backends.transformers import knobs  # noqa: E402
from engine.backends.transformers.recipe import TransformersRecipe  # noqa: E402


def _tiny(model_type: str = "llama", layers: int = 6, **extra):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(
        model_type,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=256,
        **extra,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa").eval()
    model.generation_config.pad_token_id = 0
    return model


def _greedy(model, n: int = 5, **kwargs):
    ids = torch.arange(1, 17)[None]
    with torch.inference_mode():
        return model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            **kwargs,
        )


@pytest.mark.parametrize("where, expected", [("end", [4, 5]), ("start", [0, 1]), ("middle", [2, 3])])
def test_layers_to_drop(where, expected):
    assert knobs.layers_to_drop(6, 2, where) == expected
    assert knobs.layers_to_drop(6, 0, where) == []


def test_layers_to_drop_keeps_two():
    with pytest.raises(ValueError, match="keep at least two"):
        knobs.layers_to_drop(6, 5, "end")


def test_drop_layers_renumbers_and_generates():
    model = _tiny()
    applied = knobs.apply_drop_layers(model, 2, "middle")
    assert applied == {"dropped_layers": [2, 3], "num_hidden_layers": 4}
    layers = knobs.decoder_layers(model)
    assert [layer.self_attn.layer_idx for layer in layers] == [0, 1, 2, 3]
    assert model.config.num_hidden_layers == 4
    assert _greedy(model).shape == (1, 21)
    assert knobs.apply_drop_layers(model, 0, "end") == {}


def test_sliding_window_only_where_supported():
    with pytest.raises(ValueError, match="no sliding-window attention"):
        knobs.apply_sliding_window(_tiny("llama"), 8)
    model = _tiny("mistral", sliding_window=None)
    full = _greedy(model, 6)
    assert knobs.apply_sliding_window(model, 4) == {"sliding_window": 4}
    assert model.config.sliding_window == 4
    windowed = _greedy(model, 6)
    assert windowed.shape == full.shape
    # A 4-token window over a 16-token prompt sees different context: the logits must change.
    ids = torch.arange(1, 17)[None]
    with torch.inference_mode():
        short = model(input_ids=ids).logits[0, -1]
        model.config.sliding_window = None
        for layer in knobs.decoder_layers(model):
            layer.self_attn.sliding_window = None
        long = model(input_ids=ids).logits[0, -1]
    assert not torch.allclose(short, long)


def test_torchao_int8_weight_only_quantizes_all_but_the_head():
    pytest.importorskip("torchao")
    model = _tiny()
    applied = knobs.apply_torchao(model, "torchao_int8_weight_only")
    assert applied["quantization"] == "torchao_int8_weight_only"
    assert applied["quantized_linears"] == 6 * 7
    assert type(model.model.layers[0].mlp.up_proj.weight).__name__ != "Parameter"
    assert type(model.lm_head.weight).__name__ == "Parameter"
    assert _greedy(model).shape == (1, 21)


def test_torch_dynamic_int8_replaces_linears():
    model, applied = knobs.apply_torch_dynamic_int8(_tiny())
    assert applied["quantized_linears"] == 6 * 7 + 1
    assert (
        "Dynamic" in type(model.model.layers[0].mlp.up_proj).__name__
        or "quantized" in type(model.model.layers[0].mlp.up_proj).__module__
    )
    assert _greedy(model).shape == (1, 21)


def test_cache_kwargs():
    cpu = torch.device("cpu")
    kwargs, applied = knobs.cache_kwargs(TransformersRecipe(), cpu)
    assert kwargs == {} and applied == {"cache_implementation": "dynamic", "compile": False}
    kwargs, applied = knobs.cache_kwargs(TransformersRecipe(cache_implementation="static"), cpu)
    assert kwargs == {"cache_implementation": "static", "disable_compile": True}
    kwargs, applied = knobs.cache_kwargs(
        TransformersRecipe(cache_implementation="static", compile=True, compile_mode="max-autotune"), cpu
    )
    assert kwargs["compile_config"].mode == "max-autotune" and kwargs["compile_config"]._compile_all_devices
    assert applied["compile"] is True
    kwargs, applied = knobs.cache_kwargs(TransformersRecipe(kv_cache_quantization="hqq_int8"), cpu)
    assert kwargs == {"cache_implementation": "quantized", "cache_config": {"backend": "hqq", "nbits": 8}}
    assert "hqq" in applied


def test_static_cache_generates_the_same_tokens():
    model = _tiny()
    kwargs, _ = knobs.cache_kwargs(TransformersRecipe(cache_implementation="static"), torch.device("cpu"))
    assert torch.equal(_greedy(model), _greedy(model, **kwargs))


def test_prompt_lookup_counts_acceptance():
    model = _tiny()
    stats = knobs.SpeculationStats()
    knobs.instrument_speculation(model, stats)
    recipe = TransformersRecipe(speculative="prompt_lookup", prompt_lookup_ngram=2, num_speculative_tokens=4)
    kwargs, applied = knobs.speculative_kwargs(recipe, None)
    assert kwargs == {"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 2}
    baseline = _greedy(model, 8)
    assert torch.equal(_greedy(model, 8, **kwargs), baseline)  # lossless
    assert stats.steps > 0 and 0 <= stats.accepted <= stats.proposed
    assert applied["speculative"] == "prompt_lookup"


def test_early_exit_is_lossless():
    model = _tiny()
    recipe = TransformersRecipe(speculative="early_exit", early_exit_layer=2, num_speculative_tokens=3)
    kwargs, applied = knobs.speculative_kwargs(recipe, None)
    assert kwargs == {"assistant_early_exit": 2, "num_assistant_tokens": 3}
    assert torch.equal(_greedy(model, 6, **kwargs), _greedy(model, 6))
    assert applied["early_exit_layer"] == 2


def test_gptq_cache_key_depends_on_every_gptq_knob(tmp_path):
    base = knobs.gptq_cache_key(str(tmp_path), TransformersRecipe(quantization="gptq"), "text")
    assert base == knobs.gptq_cache_key(str(tmp_path), TransformersRecipe(quantization="gptq"), "text")
    for change in ({"gptq_bits": 8}, {"gptq_group_size": 64}, {"gptq_desc_act": True}):
        assert base != knobs.gptq_cache_key(str(tmp_path), TransformersRecipe(quantization="gptq", **change), "text")
    assert base != knobs.gptq_cache_key(str(tmp_path), TransformersRecipe(quantization="gptq"), "other")


def test_calibration_texts(tmp_path):
    path = tmp_path / "calib.txt"
    path.write_text("hello world. " * 500)
    texts = knobs.calibration_texts(TransformersRecipe(quantization="gptq", gptq_calibration_file=str(path)), 4, 1000)
    assert len(texts) == 4 and all(len(t) == 1000 for t in texts)
    assert knobs.calibration_texts(TransformersRecipe(quantization="gptq"), 2)


def test_default_gptq_calibration_leaves_the_scored_text_out_and_rekeys_the_cache(tmp_path):
    from engine.data import corpus

    recipe = TransformersRecipe(quantization="gptq")
    texts = knobs.calibration_texts(recipe)
    scored = corpus.evaluation_part().text
    assert not any(piece[:100] in scored for piece in texts)  # it used to start with the scored text
    old = corpus.default_corpus()[:128_000]  # what it calibrated on before: the corpus from its start
    old_texts = [old[i : i + 2000] for i in range(0, len(old), 2000)]
    key = knobs.gptq_cache_key(str(tmp_path), recipe, "\n".join(texts))
    assert key != knobs.gptq_cache_key(str(tmp_path), recipe, "\n".join(old_texts))  # no stale build is reused


# -- CUDA-only knobs ------------------------------------------------------------------------------
def _tiny_cuda(dtype):
    return _tiny().to("cuda", dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["bnb_nf4", "bnb_int8"])
def test_bitsandbytes_on_cuda(kind):
    pytest.importorskip("bitsandbytes")
    model = _tiny_cuda(torch.float16)
    applied = knobs.apply_bnb(model, kind, torch.float16, torch.device("cuda"))
    assert applied["quantized_linears"] == 6 * 7
    ids = torch.arange(1, 17, device="cuda")[None]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)
    assert out.shape[1] == 20


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["torchao_int4_weight_only", "torchao_float8", "torchao_int8_dynamic"])
def test_torchao_cuda_kinds(kind):
    if kind == "torchao_float8" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("float8 needs compute capability >= 8.9")
    model = _tiny_cuda(torch.bfloat16)
    # int4 tinygemm needs in_features divisible by the group size: use a wider toy model.
    if kind == "torchao_int4_weight_only":
        from transformers import AutoConfig, AutoModelForCausalLM

        cfg = AutoConfig.for_model(
            "llama",
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        )
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).to("cuda").eval()
        model.generation_config.pad_token_id = 0
    applied = knobs.apply_torchao(model, kind)
    assert applied["quantized_linears"] > 0
    ids = torch.arange(1, 17, device="cuda")[None]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)
    assert out.shape[1] == 20


def test_gptq_is_built_once_and_cached_by_fingerprint(tmp_path, monkeypatch):
    """The GPTQ build path with transformers' loader faked (gptqmodel is not installable here)."""
    import transformers

    calls: list[dict] = []

    class FakeModel:
        def save_pretrained(self, path):
            (path / "model.safetensors").parent.mkdir(parents=True, exist_ok=True)
            (path / "model.safetensors").write_text("q")

    class FakeTokenizer:
        def save_pretrained(self, path):
            (path / "tokenizer.json").write_text("{}")

    def fake_config(**kwargs):
        calls.append(kwargs)
        return kwargs

    monkeypatch.setattr(transformers, "GPTQConfig", fake_config)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(lambda *a, **k: FakeTokenizer()))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", staticmethod(lambda *a, **k: FakeModel()))
    calib = tmp_path / "calib.txt"
    calib.write_text("some calibration text. " * 200)
    recipe = TransformersRecipe(
        quantization="gptq", gptq_bits=4, gptq_group_size=64, gptq_desc_act=True, gptq_calibration_file=str(calib)
    )
    notes: list[str] = []
    folder, applied = knobs.gptq_folder(
        "/models/x", recipe, tmp_path, torch.device("cpu"), lambda m, _f: notes.append(m)
    )
    assert applied["gptq_cached"] is False and (folder / ".complete").exists()
    assert calls[0]["bits"] == 4 and calls[0]["group_size"] == 64 and calls[0]["desc_act"] is True
    assert calls[0]["dataset"] and notes
    again, applied2 = knobs.gptq_folder("/models/x", recipe, tmp_path, torch.device("cpu"), lambda m, _f: None)
    assert again == folder and applied2["gptq_cached"] is True and len(calls) == 1
    other, _ = knobs.gptq_folder(
        "/models/x", recipe.model_copy(update={"gptq_bits": 8}), tmp_path, torch.device("cpu"), lambda m, _f: None
    )
    assert other != folder and len(calls) == 2
