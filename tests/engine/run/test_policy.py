"""Every file a job reads lies under the operator's allowed roots (after resolving symlinks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.run.preflight import preflight
from engine.spec import SpecError, parse_job_spec


def _use_roots(monkeypatch, value: str, name: str = "LATENCYLAB_ALLOWED_ROOTS") -> None:
    from engine.settings import get_settings

    monkeypatch.setenv(name, value)
    get_settings.cache_clear()


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """(root, outside): an allowed root with a model folder in it, a folder outside with every kind of file."""
    from engine.settings import get_settings

    root, outside = tmp_path / "allowed", tmp_path / "outside"
    for folder in (root / "model", outside / "model"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (outside / "prompts.txt").write_text("a secret prompt\n")
    (outside / "task.jsonl").write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    (outside / "task.yaml").write_text("task: x\n")
    (outside / "m.gguf").write_bytes(b"GGUF")
    _use_roots(monkeypatch, str(root))
    yield root, outside
    monkeypatch.delenv("LATENCYLAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("LATENCYLAB_ALLOWED_MODEL_ROOTS", raising=False)
    get_settings.cache_clear()


def _spec(root: Path, outside: Path, field: str) -> dict:
    """A spec whose model is inside the root and whose ``field`` points outside it."""
    o = str(outside)
    model = {"source": str(root / "model")}
    transformers = {"engine": "transformers"}
    workload = {"prompt_tokens": 16, "output_tokens": 4, "requests": 1}
    cases = {
        "model": {"model": {"source": f"{o}/model"}},
        "model (gguf)": {"model": {"source": f"{o}/m.gguf"}},
        "assistant_model": {
            "recipe": {**transformers, "speculative": "assistant", "assistant_model": f"{o}/model"},
        },
        "speculative_model": {
            "recipe": {"engine": "vllm-server", "speculative": "draft", "speculative_model": f"{o}/model"},
        },
        "gptq_calibration_file": {
            "recipe": {**transformers, "quantization": "gptq", "gptq_calibration_file": f"{o}/prompts.txt"},
        },
        "prompt_file": {"workload": {"prompt_tokens": None, "prompt_file": f"{o}/prompts.txt", "requests": 1}},
        "corpus": {"quality": {"metrics": ["ppl"], "corpus": f"{o}/prompts.txt"}},
        "task (jsonl)": {"quality": {"metrics": [f"task:{o}/task.jsonl"]}},
        "task (yaml)": {"quality": {"metrics": [f"task:{o}/task.yaml"]}},
    }
    return {"model": model, "workload": workload, **cases[field]}


FIELDS = [
    "model",
    "model (gguf)",
    "assistant_model",
    "speculative_model",
    "gptq_calibration_file",
    "prompt_file",
    "corpus",
    "task (jsonl)",
    "task (yaml)",
]


@pytest.mark.parametrize("field", FIELDS)
def test_every_input_outside_the_roots_is_refused_naming_its_field(tree, field):
    root, outside = tree
    spec = parse_job_spec(_spec(root, outside, field))
    with pytest.raises(SpecError) as err:
        preflight(spec, runtime=False)
    message = str(err.value)
    assert message.startswith(f"{field.split(' ')[0]} {outside}")
    assert f"is outside the folders the operator allows ({root})" in message
    assert "\n" not in message


def test_a_symlink_inside_a_root_that_points_outside_is_refused(tree):
    root, outside = tree
    link = root / "prompts.txt"
    link.symlink_to(outside / "prompts.txt")
    spec = parse_job_spec(
        {"model": {"source": str(root / "model")}, "workload": {"prompt_tokens": None, "prompt_file": str(link)}}
    )
    with pytest.raises(SpecError, match=f"prompt_file {link} is outside"):
        preflight(spec, runtime=False)
    # a symlinked folder inside the root, too
    (root / "linked").symlink_to(outside / "model")
    with pytest.raises(SpecError, match="model .*linked is outside"):
        preflight(parse_job_spec({"model": {"source": str(root / "linked")}}), runtime=False)


def test_files_inside_the_roots_pass_and_relative_paths_resolve(tree, monkeypatch):
    from engine.run.policy import check_inputs

    root, _outside = tree
    (root / "prompts.txt").write_text("hello there\n")
    monkeypatch.chdir(root)
    spec = parse_job_spec(
        {
            "model": {"source": "./model"},
            "workload": {"prompt_tokens": None, "prompt_file": "prompts.txt"},
            "quality": {"metrics": ["ppl"], "corpus": str(root / "prompts.txt")},
        }
    )
    check_inputs(spec)  # nothing raised
    monkeypatch.chdir(root / "model")
    with pytest.raises(SpecError, match="prompt_file ../../outside/prompts.txt is outside"):
        check_inputs(parse_job_spec({"model": {"source": "demo"}, "workload": _rel_prompt()}))


def _rel_prompt() -> dict:
    return {"prompt_tokens": None, "prompt_file": "../../outside/prompts.txt"}


def test_a_hub_id_that_is_a_local_folder_outside_is_refused(tree, monkeypatch):
    """transformers and vLLM load an existing folder named like a hub id before asking the hub."""
    from engine.run.policy import check_inputs

    _root, outside = tree
    monkeypatch.chdir(outside)
    (outside / "org" / "name").mkdir(parents=True)
    with pytest.raises(SpecError, match="model org/name is outside"):
        check_inputs(parse_job_spec({"model": {"source": "org/name"}}))
    check_inputs(parse_job_spec({"model": {"source": "someone/elsewhere"}}))  # a real hub id: allowed


def test_the_old_variable_still_works_and_unset_means_anywhere(tree, monkeypatch):
    from engine.run.policy import check_inputs

    root, outside = tree
    spec = parse_job_spec(_spec(root, outside, "prompt_file"))
    monkeypatch.delenv("LATENCYLAB_ALLOWED_ROOTS")
    _use_roots(monkeypatch, str(root), "LATENCYLAB_ALLOWED_MODEL_ROOTS")
    with pytest.raises(SpecError, match="prompt_file .* is outside"):
        check_inputs(spec)
    monkeypatch.delenv("LATENCYLAB_ALLOWED_MODEL_ROOTS")
    from engine.settings import get_settings

    get_settings.cache_clear()
    check_inputs(spec)  # no roots configured: anywhere


def test_submit_refuses_and_queues_nothing(tree, db, db_url, capsys):
    from engine.cli.main import main
    from storage import jobs

    _root, outside = tree
    code = main(["submit", "--model", "demo", "--prompt-file", str(outside / "prompts.txt"), "--db", db_url])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "prompt_file" in err and "outside the folders" in err
    assert jobs.list_jobs(db) == []


def test_cli_run_refuses_before_anything_is_stored(tree, db, db_url, capsys):
    from engine.cli.main import main
    from storage import runs

    _root, outside = tree
    argv = ["run", "--model", "demo", "--quality", "ppl", "--quality-corpus", str(outside / "prompts.txt")]
    assert main([*argv, "--db", db_url]) == 2
    assert "corpus" in capsys.readouterr().err and runs.list_runs(db) == []


def test_a_job_queued_before_the_roots_changed_is_refused_when_it_starts(tree, db):
    """Pre-flight runs again in the job's process: the roots of the machine that runs it decide."""
    from engine.run.runner import run_benchmark
    from storage import runs

    _root, outside = tree
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "workload": {"prompt_tokens": None, "prompt_file": str(outside / "prompts.txt")}}
    )
    with pytest.raises(SpecError, match="prompt_file .* is outside"):
        run_benchmark(spec, db=db, log=lambda _m: None)
    assert runs.list_runs(db) == []
