"""The traffic preview: the job's own source planned with the model's light tokenizer, capped, in one line when bad."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.report.traffic_figures import preview_lines, rate_figure, turns_figure
from engine.report.traffic_preview import PREVIEW_CAP, PreviewUnavailable, prefix_share, preview
from engine.spec import SpecError, parse_job_spec

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def demo_tokenizer_folder(demo_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder with the demo model's tokenizer and config, no weights."""
    folder = tmp_path_factory.mktemp("tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        if (demo_folder / name).is_file():
            (folder / name).write_bytes((demo_folder / name).read_bytes())
    return folder


def spec(model: str = "synthetic:smollm2-135m", **workload):  # type: ignore[no-untyped-def]
    return parse_job_spec({"model": {"source": model}, "workload": workload})


def mooncake(tmp_path: Path, rows: int = 20) -> str:
    """A Mooncake trace: a row every 500 ms, two shared leading blocks, one block of its own."""
    lines = [
        {
            "timestamp": i * 500,
            "input_length": 1100 + 100 * (i % 3),
            "output_length": 10 + i,
            "hash_ids": [1, 2, 100 + i],
        }
        for i in range(rows)
    ]
    path = tmp_path / "mooncake.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return str(path)


def sharegpt(tmp_path: Path) -> str:
    """Six ShareGPT conversations of 1, 2 or 3 user turns."""
    convs = []
    for i in range(6):
        msgs = []
        for t in range(1 + i % 3):
            msgs += [
                {"from": "human", "value": f"question {i} turn {t}"},
                {"from": "gpt", "value": "an answer " * (t + 1)},
            ]
        convs.append({"conversations": msgs})
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(convs))
    return str(path)


def test_a_mooncake_trace_previews_its_schedule_and_shared_prefixes(tmp_path: Path) -> None:
    p = preview(spec(trace=mooncake(tmp_path), time_scale=2))
    assert (p.requests, p.previewed, p.capped) == (20, 20, False)
    assert p.duration_s == pytest.approx(19 * 0.5 / 2)  # the last row due at 9.5 s, twice as fast
    assert p.due_s[:3] == pytest.approx([0.0, 0.25, 0.5])
    assert p.prompt_tokens[:3] == [1100, 1200, 1300] and p.output_tokens[:2] == [10, 11]
    # every row after the first repeats the two shared 512-token blocks: 19 * 1024 of the prompt tokens
    assert p.prefix_share == pytest.approx(19 * 1024 / sum(p.prompt_tokens), abs=1e-3)
    assert p.source == "trace replay mooncake.jsonl (mooncake), 2x faster"
    assert any(line.startswith("shared-prefix share: 81 %") or "81%" in line for line in preview_lines(p))
    assert rate_figure(p.due_s).data


def test_a_sharegpt_dataset_previews_turns_per_session(tmp_path: Path, demo_tokenizer_folder: Path) -> None:
    p = preview(spec(str(demo_tokenizer_folder), dataset=sharegpt(tmp_path), multi_turn=True, requests=12))
    assert sorted(p.turns_per_session) == [1, 1, 2, 2, 3, 3]  # 12 turns: six conversations of 1, 2, 3 turns
    assert len(p.prompt_tokens) == 6 and len(p.output_tokens) == 12  # later turns' prompts are built when sent
    assert p.duration_s is None and "closed loop" in p.duration_basis
    assert any("later turns" in n for n in p.notes)
    assert turns_figure(p.turns_per_session).data


def test_an_arrival_process_lasts_requests_over_rate_and_the_preview_is_capped() -> None:
    p = preview(spec(prompt_tokens=8, output_tokens=4, requests=PREVIEW_CAP + 500, arrival="poisson", rate=50))
    assert p.duration_s == pytest.approx((PREVIEW_CAP + 500) / 50)
    assert p.capped and p.previewed == PREVIEW_CAP and p.requests == PREVIEW_CAP + 500
    assert any(f"{PREVIEW_CAP:,}" in n for n in p.notes)
    assert len(p.due_s) == PREVIEW_CAP


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": "soon"}\n', "line 2"),
        ("", "empty"),
    ],
)
def test_a_bad_trace_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        preview(spec(trace=str(path)))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_dataset_without_the_models_tokenizer_here_cannot_be_previewed_but_is_not_bad_input(tmp_path: Path) -> None:
    with pytest.raises(PreviewUnavailable, match="needs the model's tokenizer: synthetic weights have no tokenizer"):
        preview(spec(dataset=sharegpt(tmp_path)))


def test_prefix_share_counts_leading_blocks_seen_before() -> None:
    a, b = list(range(64)), list(range(32)) + [999] * 32
    assert prefix_share([a, b], block=16) == pytest.approx(32 / 128)  # b repeats a's first two blocks
    assert prefix_share([a, [7] + a], block=16) == 0.0  # not a prefix: shifted by one token
    assert prefix_share([]) is None


def test_the_preview_imports_neither_torch_nor_transformers(tmp_path: Path) -> None:
    code = (
        "import sys, json\n"
        "from engine.report.traffic_preview import preview\n"
        "from engine.spec import parse_job_spec\n"
        f"preview(parse_job_spec({{'model': {{'source': 'demo'}}, 'workload': {{'trace': {mooncake(tmp_path)!r}}}}}))\n"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
