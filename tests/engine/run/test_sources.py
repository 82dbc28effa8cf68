"""Request sources turn datasets, sessions and traces into plans (no model: a word tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.run.sources import PlanContext, pinned, plan_requests
from engine.spec import SpecError, parse_job_spec


class Words:
    """Test double: one token per word; the chat template is 'role: content' lines."""

    eos_token_id = 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab) + 1) for w in text.split()]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:  # type: ignore[no-untyped-def]
        words = {i: w for w, i in self.vocab.items()}
        return " ".join(words.get(i, "x") for i in ids)

    def __len__(self) -> int:
        return 1000

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **_kw):  # type: ignore[no-untyped-def]
        text = " ".join(f"{m['role']}: {m['content']}" for m in messages) + " assistant:"
        return self.encode(text) if tokenize else text


def ctx(context: int | None = 4096, tokenizer=None) -> PlanContext:  # type: ignore[no-untyped-def]
    return PlanContext(tokenizer if tokenizer is not None else Words(), 1000, context)


def workload(**fields):  # type: ignore[no-untyped-def]
    return parse_job_spec({"model": {"source": "demo"}, "workload": fields}).workload


@pytest.fixture
def sharegpt(tmp_path: Path) -> str:
    convs = []
    for i in range(10):
        msgs = [{"from": "system", "value": "be brief"}] if i == 0 else []
        for t in range(3):
            msgs += [
                {"from": "human", "value": f"q{i} t{t} " + "w " * (i + 1)},
                {"from": "gpt", "value": "r " * (t + 2)},
            ]
        convs.append({"conversations": msgs})
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(convs))
    return str(path)


def test_a_dataset_sends_first_turns_with_the_reply_lengths(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, requests=6, warmup_requests=2), ctx())
    assert plan.source == "dataset" and len(plan.warmup) == 2 and len(plan.measured) == 6
    for p in plan.warmup + plan.measured:
        assert p.request.messages[-1]["role"] == "user" and " t0 " in p.request.messages[-1]["content"]
        assert p.output_tokens == 2  # "r r": the dataset's reply to the first turn, in tokens
    again = plan_requests(workload(dataset=sharegpt, requests=6, warmup_requests=2), ctx())
    assert [p.request.messages for p in again.measured] == [p.request.messages for p in plan.measured]  # seeded


def test_output_tokens_fixes_every_length_and_filters_keep_prompt_lengths(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, requests=4, source_output_lengths=False, output_tokens=7), ctx())
    assert {p.output_tokens for p in plan.measured} == {7}
    kept = plan_requests(workload(dataset=sharegpt, requests=3, min_prompt_tokens=12, max_prompt_tokens=14), ctx())
    assert all(12 <= p.prompt_tokens <= 14 for p in kept.measured + kept.warmup)
    assert "cycled" in kept.facts  # fewer conversations fit than were asked for
    with pytest.raises(SpecError, match="no conversation fits"):
        plan_requests(workload(dataset=sharegpt, requests=3, min_prompt_tokens=500), ctx())


def test_prompts_beyond_the_context_are_clipped_and_counted_or_refused(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, requests=4, warmup_requests=0), ctx(context=10))
    assert plan.facts["clipped"] >= 1 and all(p.prompt_tokens + p.output_tokens <= 10 for p in plan.measured)
    with pytest.raises(SpecError, match="line 1.*exceed the model's context of 10"):
        plan_requests(workload(dataset=sharegpt, requests=4, strict_lengths=True), ctx(context=10))


def test_shared_prefixes_are_system_messages_of_a_dataset(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, requests=8, prefix_count=2, prefix_tokens=5), ctx())
    systems = {p.request.messages[0]["content"] for p in plan.measured}
    assert len(systems) == 2 and all(len(s.split()) == 5 for s in systems)


def test_synthetic_shared_prefixes_lead_every_prompt() -> None:
    plan = plan_requests(workload(prompt_tokens=4, requests=12, prefix_count=3, prefix_tokens=6), ctx(tokenizer=None))
    heads = {tuple(p.request.prompt[:6]) for p in plan.measured}
    assert len(heads) == 3 and all(p.prompt_tokens == 10 for p in plan.measured)
    assert plan.facts["prefix_share"] == pytest.approx(0.6)


def test_sessions_plan_turns_in_order_with_their_own_lengths(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, multi_turn=True, requests=7, warmup_requests=1), ctx())
    assert plan.source == "sessions" and len(plan.measured) == 7 and plan.chat_ids is not None
    assert [(p.session, p.turn) for p in plan.measured] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert [p.output_tokens for p in plan.measured[:3]] == [2, 3, 4]  # each turn's own reply length
    later = plan.measured[1]
    assert later.request.prompt == [] and later.request.messages == (
        {"role": "user", "content": later.request.messages[0]["content"]},
    )
    assert all(p.request.want_text for p in plan.measured) and plan.warmup[0].session is None
    convo = [
        {"role": "user", "content": "a b"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]
    assert len(plan.chat_ids(convo)) == 8  # the template over the whole conversation so far


def _mooncake(tmp_path: Path, rows: list[dict]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_mooncake_trace_shares_blocks_and_keeps_its_schedule(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 1000, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 1500, "input_length": 600, "output_length": 6, "hash_ids": [1, 3]},
        {"timestamp": 3000, "input_length": 100, "output_length": 7, "hash_ids": [9]},
    ]
    wl = workload(trace=_mooncake(tmp_path, rows), time_scale=2.0, warmup_requests=1)
    plan = plan_requests(wl, ctx(tokenizer=None))
    assert [p.due_s for p in plan.measured] == [0.0, 0.25, 1.0]  # ms from the first row, twice as fast
    a, b, c = (p.request.prompt for p in plan.measured)
    assert a[:512] == b[:512] and a[512:600] != b[512:600] and len(a) == 700 and len(c) == 100
    assert [p.output_tokens for p in plan.measured] == [5, 6, 7]
    assert plan.warmup[0].request.prompt[:512] != a[:512]  # warm-up fills no measured prefix
    assert plan.facts["shared_blocks"] == pytest.approx(0.2)


def test_a_trace_beyond_the_context_is_clipped_or_refused(tmp_path: Path) -> None:
    wl = {
        "trace": _mooncake(tmp_path, [{"timestamp": 0, "input_length": 900, "output_length": 50, "hash_ids": [1, 2]}])
    }
    plan = plan_requests(workload(**wl), ctx(context=512, tokenizer=None))
    assert plan.facts["clipped"] == 1 and plan.measured[0].prompt_tokens == 462
    with pytest.raises(SpecError, match=r"trace\.jsonl line 1: 900 prompt tokens"):
        plan_requests(workload(**wl, strict_lengths=True), ctx(context=512, tokenizer=None))


def test_cancellations_are_planned_seeded(sharegpt: str) -> None:
    plan = plan_requests(workload(dataset=sharegpt, requests=40, cancel_rate=0.25, cancel_after_ms=100), ctx())
    cancelled = [p for p in plan.measured if p.cancel_after_s is not None]
    assert 4 <= len(cancelled) <= 18 and all(p.cancel_after_s == 0.1 for p in cancelled)
    assert plan.facts["cancel_planned"] == len(cancelled)


def test_the_input_file_joins_the_fingerprint_and_must_not_change(sharegpt: str) -> None:
    spec = parse_job_spec({"model": {"source": "demo"}, "workload": {"dataset": sharegpt}})
    pin = pinned(spec)
    assert pin.workload.traffic.content_hash() and pin.fingerprint() != spec.fingerprint()
    assert pinned(pin) == pin
    Path(sharegpt).write_text(Path(sharegpt).read_text().replace("brief", "short"))
    with pytest.raises(SpecError, match="changed since the job was queued"):
        pinned(pin)
    plain = parse_job_spec({"model": {"source": "demo"}})
    assert pinned(plain) is plain  # synthetic prompts: nothing to pin, fingerprints as before
