"""The managed vLLM server's extra_args: only allow-listed tuning flags; remote code is a visible knob."""

from __future__ import annotations

import pytest

from engine.backends.vllm.server_flags import ALLOWED_SERVER_FLAGS, KNOB_FLAGS, server_extra_argv
from engine.spec import SpecError, parse_job_spec


def _server(extra_args: str | None = None, **knobs):
    recipe = {"engine": "vllm-server", "extra_args": extra_args, **knobs}
    return parse_job_spec({"model": {"source": "demo"}, "recipe": recipe})


@pytest.mark.parametrize(
    "extra_args, fragment",
    [
        ("--trust-remote-code --host 0.0.0.0", "--trust-remote-code is set by the recipe knob trust_remote_code"),
        ("--host 0.0.0.0", "--host is not allowed"),
        ("--host=0.0.0.0", "--host is not allowed"),
        ("--port 80", "--port is not allowed"),
        ("--api-key abc", "--api-key is not allowed"),
        ("--model /etc", "--model is not allowed"),
        ("--served-model-name other", "--served-model-name is not allowed"),
        ("--seed --host", "--seed needs a plain value"),
        ("--seed=--host", "--seed needs a plain value"),
        ("--seed 1 --seed 2", "--seed is given twice"),
        ("/some/model", "'/some/model' is not a flag"),
        ("--disable-fastapi-docs=1", "--disable-fastapi-docs is not allowed"),
        ("--max-num-seqs 4", "--max-num-seqs is set by the recipe knob max_num_seqs"),
        ("--seed '1", "cannot be split into arguments"),
    ],
)
def test_flags_outside_the_allow_list_are_refused_in_one_line(extra_args, fragment):
    with pytest.raises(SpecError) as err:
        _server(extra_args)
    message = str(err.value)
    assert fragment in message and "\n" not in message
    if "is not allowed" in fragment or "knob" in fragment:
        assert "extra_args takes only: --seed" in message  # the allowed flags are listed


def test_submit_refuses_the_reported_knob(db, db_url, capsys):
    from engine.cli.main import main
    from storage import jobs

    argv = ["submit", "--model", "demo", "--engine", "vllm-server"]
    code = main([*argv, "--knob", "extra_args=--trust-remote-code --host 0.0.0.0", "--db", db_url])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--trust-remote-code" in err and "extra_args takes only" in err
    assert jobs.list_jobs(db) == []


def test_allowed_flags_become_argv_before_the_jobs_own_flags():
    from engine.backends.vllm.server import ManagedServer

    spec = _server("--seed 7 --disable-uvicorn-access-log --uvicorn-log-level=warning")
    assert spec.recipe.extra_argv() == [
        "--seed",
        "7",
        "--disable-uvicorn-access-log",
        "--uvicorn-log-level",
        "warning",
    ]
    args = ManagedServer("/models/m", spec.recipe, "cpu").args
    extra_at, host_at = args.index("--seed"), args.index("--host")
    assert extra_at < host_at  # argparse keeps the last value: the job's own flags win
    assert args[host_at + 1] == "127.0.0.1" and "--no-trust-remote-code" in args
    assert server_extra_argv(None) == []


def test_remote_code_is_off_everywhere_unless_the_recipe_turns_it_on():
    from engine.backends.transformers.recipe import TransformersRecipe
    from engine.backends.vllm.inprocess import engine_kwargs, server_args
    from engine.report.recipes import recipe_in_words

    assert TransformersRecipe().trust_remote_code is False
    plain = _server().recipe
    assert engine_kwargs(plain, "cpu", "/m")["trust_remote_code"] is False
    assert "--no-trust-remote-code" in server_args(plain, "cpu", "/m")
    on = _server(trust_remote_code=True)
    assert "--trust-remote-code" in server_args(on.recipe, "cpu", "/m")
    assert "trusts remote code" in on.recipe.describe()
    assert "trust remote code" in recipe_in_words(on.model_dump(mode="json"), "vllm-server")  # the Run page's line
    assert "remote code" not in plain.describe()


def test_the_knob_at_its_default_keeps_old_fingerprints():
    """Fingerprints from before the knob existed (pinned) are unchanged while it is off."""
    pinned = {"vllm-server": "398e51d5b350d409", "vllm": "94bde85c1a7619c6", "transformers": "1b1512eb5d8b99b6"}
    for engine, fingerprint in pinned.items():
        spec = parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": engine}})
        assert spec.fingerprint() == fingerprint
        on = parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": engine, "trust_remote_code": True}})
        assert on.fingerprint() != fingerprint


@pytest.mark.slow
def test_every_allowed_flag_is_a_flag_of_the_installed_vllm_server():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    options = set(make_arg_parser(FlexibleArgumentParser())._option_string_actions)
    assert [f for f in ALLOWED_SERVER_FLAGS if f not in options] == []
    assert [f for f in KNOB_FLAGS if f not in options] == []
