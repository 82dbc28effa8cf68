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


@pytest.fixture
def signed_in(tmp_path, monkeypatch, session_dir):
    """Sign-in configured (an [auth] section Streamlit reads), no roots set: the data folder's defaults apply."""
    from engine.settings import get_settings

    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1:1/oauth2callback"\ncookie_secret = "s"\n')
    monkeypatch.setenv("STREAMLIT_SECRETS_FILES", str(secrets))
    monkeypatch.delenv("LATENCYLAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("LATENCYLAB_ALLOWED_MODEL_ROOTS", raising=False)
    get_settings.cache_clear()
    yield get_settings().data_dir
    get_settings.cache_clear()


def _trace(path: object) -> dict:
    return {"model": {"source": "demo"}, "workload": {"trace": str(path), "trace_format": "azure"}}


def test_with_sign_in_on_inputs_default_to_the_data_folders(signed_in, tmp_path):
    from engine.run.policy import check_inputs
    from engine.settings import DEFAULT_INPUT_FOLDERS, input_folders

    data = signed_in
    folders = input_folders()
    assert folders is not None and not folders.configured
    assert folders.folders == tuple(data / name for name in DEFAULT_INPUT_FOLDERS)
    with pytest.raises(SpecError) as err:
        check_inputs(parse_job_spec(_trace("/etc/passwd")))
    message = str(err.value)
    assert message.startswith("trace /etc/passwd is outside the folders this app reads with sign-in on (")
    assert f"{data / 'traces'}, {data / 'datasets'}, {data / 'models'}, {data / 'prompts'}" in message
    assert "LATENCYLAB_ALLOWED_ROOTS names others" in message and "\n" not in message
    (data / "traces").mkdir(exist_ok=True)
    inside = data / "traces" / "t.csv"
    inside.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,4\n")
    check_inputs(parse_job_spec(_trace(inside)))  # inside a default folder: allowed
    (data / "traces" / "out.csv").symlink_to(tmp_path / "elsewhere.csv")
    with pytest.raises(SpecError, match="outside the folders"):
        check_inputs(parse_job_spec(_trace(data / "traces" / "out.csv")))


def test_with_sign_in_on_the_operators_roots_replace_the_defaults(signed_in, tree):
    from engine.run.policy import check_inputs

    root, outside = tree
    with pytest.raises(SpecError, match=f"is outside the folders the operator allows \\({root}\\)"):
        check_inputs(parse_job_spec(_trace(signed_in / "traces" / "t.csv")))


def test_without_sign_in_a_local_app_reads_anywhere(monkeypatch, tmp_path):
    from engine.run.policy import check_inputs
    from engine.settings import get_settings, input_folders

    monkeypatch.setenv("STREAMLIT_SECRETS_FILES", str(tmp_path / "none.toml"))
    monkeypatch.delenv("LATENCYLAB_ALLOWED_ROOTS", raising=False)
    get_settings.cache_clear()
    assert input_folders() is None
    check_inputs(parse_job_spec(_trace("/etc/passwd")))  # nothing raised: the file is read (and judged) later


def test_with_sign_in_on_submit_refuses_a_trace_outside_and_queues_nothing(signed_in, db, db_url, capsys):
    from engine.cli.main import main
    from storage import jobs

    code = main(["submit", "--model", "demo", "--trace", "/etc/passwd", "--trace-format", "azure", "--db", db_url])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "trace /etc/passwd is outside the folders this app reads with sign-in on" in err and "/bin/" not in err
    assert jobs.list_jobs(db) == []


def test_with_sign_in_on_the_jobs_own_preflight_refuses_before_anything_is_stored(signed_in, db):
    from engine.run.runner import run_benchmark
    from storage import runs

    with pytest.raises(SpecError, match="trace /etc/passwd is outside the folders this app reads with sign-in on"):
        run_benchmark(parse_job_spec(_trace("/etc/passwd")), db=db, log=lambda _m: None)
    assert runs.list_runs(db) == []
