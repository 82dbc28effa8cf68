"""The registry of engines: an engine is one package, named once outside it, and the spec layer stays pure."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from engine.spec import SpecError, engines, parse_job_spec
from engine.spec.descriptor import UNKNOWN_FAMILY, EngineDescriptor

REPO = Path(__file__).resolve().parents[3]
SCANNED = ("engine", "storage", "views", "ui")
REGISTRY_FILE = "engine/spec/engines.py"
MOST_FILES = 2  # the registry and one more
# Quoted engine names outside their package that are not the engine: (file, word, what it is).
NOT_THE_ENGINE = {
    ("engine/measure/server_metrics.py", "vllm"): "the vLLM server software's /metrics dialect (also behind openai)",
}
HEAVY = ("torch", "transformers", "vllm", "sqlalchemy", "aiohttp", "psutil", "pynvml", "engine.settings")


def _package(descriptor: EngineDescriptor) -> str:
    """``engine/backends/<engine>/``: the folder of the engine's descriptor (its backend's package)."""
    module = descriptor.backend.split(":")[0]
    return module.rsplit(".", 1)[0].replace(".", "/") + "/"


def _quoted_names() -> dict[str, dict[str, list[int]]]:
    """engine name -> file -> lines where the name is a whole string literal, outside the engine's package."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *SCANNED],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = {d.name: _package(d) for d in engines.all_engines()}
    out: dict[str, dict[str, list[int]]] = {name: {} for name in names}
    for path in sorted(p for p in tracked if p.endswith(".py") and (REPO / p).exists()):
        for node in ast.walk(ast.parse((REPO / path).read_text(), path)):
            if not (isinstance(node, ast.Constant) and node.value in names):
                continue
            if path.startswith(names[node.value]) or (path, node.value) in NOT_THE_ENGINE:
                continue
            out[node.value].setdefault(path, []).append(node.lineno)
    return out


def test_each_engine_is_named_in_at_most_two_files_outside_its_package():
    quoted = _quoted_names()
    assert set(quoted) == set(engines.names())
    for name, files in quoted.items():
        others = {f: lines for f, lines in files.items() if f != REGISTRY_FILE}
        assert len(files) <= MOST_FILES and len(others) <= MOST_FILES - 1, (name, files)


def test_the_allow_list_names_words_that_are_really_there():
    quoted_anywhere = {
        (path, node.value)
        for path, _ in NOT_THE_ENGINE
        for node in ast.walk(ast.parse((REPO / path).read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert set(NOT_THE_ENGINE) <= quoted_anywhere


def test_the_spec_layer_loads_nothing_heavy():
    code = (
        "import sys\n"
        "import engine.spec, engine.spec.engines, engine.spec.forms, engine.spec.presets, engine.spec.sweep\n"
        "from engine.spec import JobSpec, parse_job_spec\n"
        "parse_job_spec({'model': {'source': 'demo'}, 'recipe': {'engine': 'vllm-server'}})\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


@pytest.mark.parametrize("first", ["engine.backends.transformers.descriptor", "engine.backends.vllm.recipe"])
def test_a_descriptor_or_recipe_imported_first_imports_cleanly(first):
    code = f"import {first}\nfrom engine.spec import engines\nprint(len(engines.names()))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0 and int(out.stdout) == len(engines.names()), out.stderr


def test_every_descriptor_names_modules_that_exist():
    for d in engines.all_engines():
        for target in (d.backend, d.preflight):
            if target is not None:
                module = target.split(":")[0]
                assert importlib.util.find_spec(module) is not None, (d.name, target)
        assert d.summary and d.recipe.model_fields["engine"].default == d.name


def test_the_first_engine_is_the_default():
    assert engines.default() is engines.all_engines()[0]
    assert parse_job_spec({"model": {"source": "demo"}}).recipe.engine == engines.default().name


def test_an_unknown_engine_is_one_line_naming_the_others():
    with pytest.raises(SpecError) as exc:
        parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "warp"}})
    assert str(exc.value) == f"recipe: unknown engine 'warp'; available: {', '.join(engines.names())}"
    with pytest.raises(SpecError, match="unknown engine 'warp'"):
        engines.get("warp")


def test_every_what_if_family_is_modelled_or_says_unknown():
    from engine.whatif.admit import FAMILIES
    from engine.whatif.roofline import ENGINES

    for d in engines.all_engines():
        assert d.whatif.family in FAMILIES or d.whatif.family == UNKNOWN_FAMILY, d.name
        assert not d.whatif.priors or d.whatif.family in ENGINES
    assert all(family in ENGINES for family in FAMILIES)  # each modelled family has its priors


def test_a_descriptor_that_names_a_missing_knob_is_refused():
    from engine.backends.openai.recipe import OpenAIRecipe
    from engine.spec.descriptor import FormGroups

    with pytest.raises(ValueError, match="warp"):
        EngineDescriptor("openai", OpenAIRecipe, "s", "m:C", form=FormGroups(basic=("warp",)))
    with pytest.raises(ValueError, match="must default to 'other'"):
        EngineDescriptor("other", OpenAIRecipe, "s", "m:C")


@pytest.mark.parametrize(
    ("recipe", "fingerprint"),
    [
        ({"engine": "openai", "model_name": "m"}, "6358714276e83a9e"),
        ({"engine": "vllm", "speculative": "ngram"}, "1a2b69a2be4dc41a"),
        ({"engine": "transformers", "dtype": "bfloat16", "drop_layers": 2}, "717be275d65b19f7"),
    ],
)
def test_the_registry_keeps_the_fingerprints_of_the_union_it_replaced(recipe, fingerprint):
    """Pinned from the closed recipe union's code: the dispatch dumps the same JSON."""
    spec = parse_job_spec({"model": {"source": "demo"}, "recipe": recipe})
    assert spec.fingerprint() == fingerprint
    assert parse_job_spec(spec.canonical_json()).canonical_json() == spec.canonical_json()
