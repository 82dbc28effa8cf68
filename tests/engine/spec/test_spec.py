"""Specs: validation messages, canonical JSON and fingerprints."""

from __future__ import annotations

import json

import pytest

from engine.spec import JobSpec, ModelSpec, SpecError, parse_job_spec


def spec(**over):
    data = {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 4}}
    data.update(over)
    return data


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("demo", "demo"),
        ("synthetic:llama-3-8b", "synthetic"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "hf"),
        ("hf:Qwen/Qwen2.5-7B", "hf"),
        ("/models/llama", "local"),
        ("./here", "local"),
        ("~/m/model.Q4_0.gguf", "gguf"),
    ],
)
def test_model_kinds(source, kind):
    assert ModelSpec(source=source).kind == kind


def test_unknown_sources_say_what_is_allowed():
    with pytest.raises(SpecError, match="synthetic:<architecture>"):
        parse_job_spec(spec(model={"source": "not a model"}))
    with pytest.raises(SpecError, match="choose one of"):
        parse_job_spec(spec(model={"source": "synthetic:gpt-17"}))


def test_synthetic_has_no_accuracy():
    assert not ModelSpec(source="synthetic:llama-3.2-1b").has_accuracy
    assert ModelSpec(source="demo").has_accuracy


@pytest.mark.parametrize(
    ("workload", "fragment"),
    [
        ({"output_tokens": 0}, "output_tokens"),
        ({"requests": -1}, "requests"),
        ({"batch_size": 0}, "batch_size"),
        ({"prompt_tokens": 0}, "prompt_tokens"),
    ],
)
def test_counts_must_be_positive(workload, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_job_spec(spec(workload={"prompt_tokens": 16, **workload}))


def test_unknown_knob_is_rejected_in_one_line():
    with pytest.raises(SpecError) as exc:
        parse_job_spec(spec(recipe={"engine": "transformers", "turbo": True}))
    assert "recipe" in str(exc.value) and "unknown field" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_engine_is_rejected():
    with pytest.raises(SpecError, match="engine"):
        parse_job_spec(spec(recipe={"engine": "warp-drive"}))


def test_device_format_and_cpu_limits():
    with pytest.raises(SpecError, match="device"):
        parse_job_spec(spec(device="gpu0"))
    with pytest.raises(SpecError, match="float16 is not supported on the CPU"):
        parse_job_spec(spec(recipe={"engine": "transformers", "dtype": "float16"}))
    assert parse_job_spec(spec(device="cuda:0,1")).device == "cuda:0,1"


def test_prompt_source_is_one_of_two():
    with pytest.raises(SpecError, match="prompt_tokens is not an option of the prompt file source"):
        parse_job_spec(spec(workload={"prompt_tokens": 16, "prompt_file": "p.txt"}))


def test_canonical_json_and_fingerprint_are_stable():
    a = parse_job_spec(spec())
    b = parse_job_spec(json.loads(a.canonical_json()))
    assert a == b
    assert a.canonical_json() == b.canonical_json()
    assert a.fingerprint() == b.fingerprint()
    # the display name is not part of what runs
    named = parse_job_spec(spec(name="my run"))
    assert named.fingerprint() == a.fingerprint()
    other = parse_job_spec(spec(workload={"prompt_tokens": 17, "output_tokens": 4}))
    assert other.fingerprint() != a.fingerprint()


def test_warmup_defaults_to_one_batch():
    s = parse_job_spec(spec(workload={"prompt_tokens": 16, "batch_size": 4}))
    assert s.workload.warmup == 4
    s = parse_job_spec(spec(workload={"prompt_tokens": 16, "batch_size": 4, "warmup_requests": 0}))
    assert s.workload.warmup == 0


def test_specs_are_frozen():
    s = JobSpec(model=ModelSpec(source="demo"))
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type
        s.device = "cuda:0"  # type: ignore[misc]


def test_an_ignored_knob_cannot_change_the_fingerprint():
    plain = parse_job_spec({"model": {"source": "demo"}})
    assert plain.fingerprint() == "1b1512eb5d8b99b6"  # stored fingerprints of default specs stay valid
    explicit = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {
                "engine": "transformers",
                "gptq_bits": 4,
                "compile_mode": "default",
                "num_speculative_tokens": 10,
            },
            "workload": {"rate": None, "max_concurrency": None, "prompt_length_spread": 0.0},
        }
    )
    assert explicit.fingerprint() == plain.fingerprint()
    # the same knobs set to something else would run the same thing: refused, not fingerprinted
    for recipe in ({"gptq_bits": 8}, {"compile_mode": "max-autotune"}, {"num_speculative_tokens": 3}):
        with pytest.raises(SpecError, match="is only used with"):
            parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "transformers", **recipe}})
    with pytest.raises(SpecError, match="rate is only used with arrival=poisson"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"rate": 4.0}})
