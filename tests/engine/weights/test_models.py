"""Where weights come from: demo, local folders, GGUF files, synthetic configs."""

from __future__ import annotations

import pytest

from engine.spec import ModelSpec, SpecError
from engine.weights import models


def test_missing_folder_and_bad_gguf(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        models.check(ModelSpec(source=str(tmp_path / "nope")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="config.json"):
        models.check(ModelSpec(source=str(tmp_path / "empty")))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"this is not a model")
    with pytest.raises(SpecError, match="not a GGUF model"):
        models.check(ModelSpec(source=str(fake)))
    with pytest.raises(SpecError, match="does not exist"):
        models.check(ModelSpec(source=str(tmp_path / "missing.gguf")))


def test_synthetic_resolves_to_a_config():
    resolved = models.resolve(ModelSpec(source="synthetic:llama-3-8b"))
    assert resolved.path is None and not resolved.has_accuracy
    assert resolved.synthetic_config["num_hidden_layers"] == 32
    assert models.context_length(resolved) == 8192


@pytest.mark.slow
def test_demo_converts_once_and_is_a_local_folder(demo_folder):
    assert (demo_folder / "config.json").is_file() and (demo_folder / "model.safetensors").is_file()
    resolved = models.resolve(ModelSpec(source="demo"))
    assert resolved.path == str(demo_folder)
    # the converted folder is also a valid "local folder" model, as a user's HF folder would be
    local = models.resolve(ModelSpec(source=str(demo_folder)))
    assert local.path == str(demo_folder.resolve())
    assert models.context_length(local) == 8192
    assert models.declared_context_length(ModelSpec(source=str(demo_folder))) == 8192


@pytest.mark.slow
def test_demo_gguf_passes_the_gguf_checks():
    gguf = models.demo_gguf_path()
    models.check(ModelSpec(source=str(gguf)))
    assert models.declared_context_length(ModelSpec(source=str(gguf))) == 8192
