"""The openai engine learns the server's context (issue 33): vLLM's /v1/models max_model_len, else the recipe's
max_model_len; requests are clipped or refused against it as for the other engines, an unknown context is said,
and a prompt the server refuses for its length fails as "refused by the server: prompt beyond its context"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import fake_server
from mock_openai import context_refusal

from engine.backends.base import Request
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.recipe import OpenAIRecipe
from engine.backends.openai.served import REFUSED, UNKNOWN_NOTE, context_of, parse_models
from engine.backends.openai.sse import RequestFailed, http_reason
from engine.measure.records import RequestRecord
from engine.spec import ModelSpec, SpecError, parse_job_spec
from engine.weights.models import ResolvedModel

SYNTHETIC = "synthetic:smollm2-135m"


def _load(url: str, max_model_len: int | None = None) -> tuple[OpenAIBackend, object]:
    backend = OpenAIBackend()
    recipe = OpenAIRecipe(base_url=url, model_name="fake", max_model_len=max_model_len)
    model = ResolvedModel(spec=ModelSpec(source=SYNTHETIC), label="x", path=None, synthetic_config={})
    return backend, backend.load(model, recipe, "cpu", lambda *_: None)


def test_models_list_and_where_the_context_comes_from() -> None:
    served = parse_models(json.dumps({"data": [{"id": "a", "max_model_len": 8192}, {"id": "b"}, "junk"]}))
    assert served.models == ["a", "b"] and served.context == {"a": 8192}
    assert parse_models(b'{"data": 3}').models == [] and parse_models(b"[]").context == {}
    assert context_of(served, "a", None).length == 8192 and context_of(served, "a", None).source == "server"
    assert (context_of(served, "a", 4096).length, context_of(served, "a", 4096).source) == (4096, "server and recipe")
    assert (context_of(served, "b", 2048).length, context_of(served, "b", 2048).source) == (2048, "recipe")
    unknown = context_of(None, "a", None)
    assert unknown.length is None and unknown.facts()["context_note"] == UNKNOWN_NOTE


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (400, context_refusal({"prompt": [1] * 20_000}, 8192), True),  # vLLM 0.32, prompt beyond the context
        (400, context_refusal({"prompt": [1] * 8192}, 8192), True),  # vLLM 0.32, no room for one output token
        (400, {"error": {"message": "max_tokens=9000 cannot be greater than max_model_len=8192."}}, True),
        (400, {"error": {"message": "Input length (9000) exceeds model's maximum context length (8192)."}}, True),
        (400, {"error": {"message": "the request exceeds the available context size, try increasing it"}}, True),
        (
            422,
            {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000"},
            True,
        ),
        (
            400,
            {"object": "error", "message": "The input (9000 tokens) is longer than the model's context length"},
            True,
        ),
        (400, {"error": {"message": "temperature must be non-negative"}}, False),
        (500, {"error": {"message": "maximum context length exceeded while batching"}}, False),
    ],
)
def test_a_refusal_for_length_is_said_so(status: int, body: dict, refused: bool) -> None:
    reason = http_reason(status, json.dumps(body))
    assert reason.startswith(f"{REFUSED} (HTTP {status}: ") is refused, reason
    assert reason.startswith(f"HTTP {status}: ") is not refused and "\n" not in reason


def test_the_backend_reads_the_served_context_or_the_recipes_or_says_it_is_unknown() -> None:
    with fake_server(max_model_len=64) as server:
        backend, report = _load(server.base_url)
        assert report.context_length == 64 and backend.info()["context_length_source"] == "server"
        backend.unload()
        backend, report = _load(server.base_url, max_model_len=48)
        assert report.context_length == 48 and backend.info()["context_length_source"] == "server and recipe"
        backend.unload()
    with fake_server(max_model_len=64, publish_context=False) as server:
        backend, report = _load(server.base_url)
        info = backend.info()
        assert report.context_length is None and info["context_length"] is None
        assert info["context_length_source"] == "unknown" and info["context_note"] == UNKNOWN_NOTE
        rec = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=100)
        with pytest.raises(RequestFailed) as err:
            backend.run(backend.stream([Request(prompt=list(range(100)), max_new_tokens=4)], [rec]))
        reason = str(err.value)
        assert reason.startswith(f"{REFUSED} (HTTP 400: This model's maximum context length is 64 tokens.")
        backend.unload()
        backend, report = _load(server.base_url, max_model_len=64)
        assert report.context_length == 64 and backend.info()["context_length_source"] == "recipe"
        backend.unload()


def _trace(tmp_path: Path, lengths: list[int]) -> str:
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": 10 * i, "input_length": n, "output_length": 8} for i, n in enumerate(lengths)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def _spec(url: str, trace: str, **workload: object):
    return parse_job_spec(
        {
            "model": {"source": SYNTHETIC},
            "recipe": {"engine": "openai", "base_url": url, "model_name": "fake"},
            "workload": {"trace": trace, "warmup_requests": 0, **workload},
        }
    )


def test_rows_beyond_the_served_context_are_clipped_or_refused_with_strict(tmp_path, db) -> None:
    from engine.run.runner import run_benchmark
    from storage import runs

    trace = _trace(tmp_path, [20, 20_000, 30])
    with fake_server(max_model_len=64) as server:
        result = run_benchmark(_spec(server.base_url, trace), db=db, log=lambda _m: None)
        sent = [len(b["prompt"]) + b["max_tokens"] for b in server.seen.bodies]
    assert result.metrics["completed"] == 3 and result.metrics["failed"] == 0
    assert max(sent) <= 64 and result.provenance["request_source"]["clipped"] == 1
    assert result.provenance["context_length"] == 64 and "context_note" not in result.provenance
    before = len(runs.list_runs(db))
    with pytest.raises(SpecError, match="beyond the model's context of 8,192"):  # pre-flight: the model's own
        run_benchmark(_spec("http://127.0.0.1:9/v1", trace, strict_lengths=True), db=db, log=lambda _m: None)
    served = _trace(tmp_path, [20, 200, 30])  # within the model's context, beyond the server's: refused once it says
    with fake_server(max_model_len=64) as server, pytest.raises(SpecError, match="context of 64"):
        run_benchmark(_spec(server.base_url, served, strict_lengths=True), db=db, log=lambda _m: None)
    assert len(runs.list_runs(db)) == before  # refused before anything was stored


def test_an_unknown_context_is_said_and_the_servers_refusals_are_failed_requests(tmp_path, db) -> None:
    from engine.run.runner import run_benchmark

    trace = _trace(tmp_path, [20, 20_000, 30])
    with fake_server(max_model_len=64, publish_context=False) as server:
        result = run_benchmark(_spec(server.base_url, trace, max_error_rate=0.5), db=db, log=lambda _m: None)
    assert result.metrics["completed"] == 2 and result.metrics["failed"] == 1
    assert result.provenance["context_note"] == UNKNOWN_NOTE
    [failed] = [r for r in result.requests if r.error]
    assert failed.error.startswith(f"{REFUSED} (HTTP 400: This model's maximum context length is 64 tokens")
