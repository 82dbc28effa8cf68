"""Property-based: random query parameters for every page (AppTest on a seeded database): each
page renders, with a message for what it could not use, never an exception, and writes nothing
(row counts unchanged)."""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_support import HUGE, PAGE_EXAMPLES, UNICODE_DIGITS, VALUE, record
from hypothesis import given, settings
from hypothesis import strategies as st
from seed_runs import open_page, seed_basic
from sqlalchemy import text

from engine.spec import Workload

TABLES = ("runs", "requests", "jobs", "hardware")

ID = st.one_of(st.sampled_from(["1", "2", "3", "4", "0", "-1", "01", " 2 "]), HUGE, UNICODE_DIGITS, VALUE)
IDS = st.lists(ID, max_size=5).map(",".join) | st.tuples(st.just("1"), ID).map(",".join)

# The parameters each page reads (its own, plus any random one).
PAGE_PARAMS: dict[str, dict[str, st.SearchStrategy]] = {
    "views/runs.py": {"run": ID},
    "views/run.py": {"run": ID},
    "views/compare.py": {"runs": IDS, "baseline": ID},
    "views/explore.py": {
        **{k: VALUE | st.sampled_from(["tpot_ms_p50", "output_tokens_per_s", "engine", ""]) for k in ("x", "y")},
        **{k: VALUE for k in ("color", "symbol", "sx", "sy", "model", "device", "engine", "sweep")},
        "view": st.sampled_from(["scatter", "sweeps"]) | VALUE,
        "since": st.sampled_from(["2026-11-30", "2026-02-30", "9999-99-99"]) | VALUE,
        "until": VALUE,
    },
    "views/jobs.py": {"status": VALUE | st.just("queued,running,done"), "sweep": VALUE},
    "views/launch.py": {
        "model": st.sampled_from(["demo", "synthetic:smollm2-135m", "org/name"]) | VALUE,
        "engine": st.sampled_from(["transformers", "vllm", "openai"]) | VALUE,
        "device": VALUE,
        **{name: VALUE for name in list(Workload.model_fields)[:8]},
        **{name: VALUE for name in ("dtype", "quantization", "drop_layers", "batch_size", "timeout")},
    },
    "views/whatif.py": {
        **{k: VALUE | st.integers(-5, 5000).map(str) for k in ("bs", "tp", "drop", "prompt", "output", "conc")},
        **{k: VALUE for k in ("model", "engine", "dtype", "kv")},
        "hw": VALUE | st.just("h100-sxm,local:cpu,nope"),
    },
}


def _params(page: str) -> st.SearchStrategy:
    known = st.fixed_dictionaries({}, optional=PAGE_PARAMS[page])
    other = st.dictionaries(st.text(min_size=1, max_size=8), VALUE, max_size=2)
    return st.tuples(known, other).map(lambda t: {**t[1], **t[0]})


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, session_dir):
    from engine.spec import parse_job_spec
    from storage import jobs, open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('fuzzpages') / 'pages.db'}"
    db = open_database(url)
    seed_basic(db)
    jobs.submit(db, parse_job_spec({"model": {"source": "demo"}}), sweep="s1")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LATENCYLAB_DB_URL", url)
        yield db


def _counts(db: Any) -> dict[str, int]:
    with db.engine.connect() as conn:
        names = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
        return {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES if t in names}


def _messages(at: Any) -> list[str]:
    return [str(m.value) for m in [*at.warning, *at.error, *at.info]]


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(PAGE_PARAMS))
def test_random_query_parameters(page, seeded):
    @settings(max_examples=PAGE_EXAMPLES)
    @given(_params(page))
    def check(params: dict[str, str]) -> None:
        before = _counts(seeded)
        at = open_page(page, **params)
        assert not at.exception, (page, params, [e.value for e in at.exception])
        assert _counts(seeded) == before, (page, params)
        record("url", "page with a message" if _messages(at) else "page rendered")

    check()


@pytest.mark.parametrize(
    ("page", "params"),
    [
        ("views/run.py", {"run": "9999999999999999999999999"}),
        ("views/runs.py", {"run": "9999999999999999999999999"}),
        ("views/compare.py", {"runs": "1,9999999999999999999999999"}),
        ("views/compare.py", {"runs": "1,²"}),
        ("views/compare.py", {"runs": "1,2", "baseline": "9223372036854775808"}),
        ("views/run.py", {"run": "٣"}),
        ("views/whatif.py", {"bs": "٣", "tp": "9" * 5000}),
    ],
)
def test_known_bad_links(page, params, seeded):
    at = open_page(page, **params)
    assert not at.exception, [e.value for e in at.exception]
    assert any("not" in m or "Ignoring" in m for m in _messages(at)), _messages(at)  # says what it could not use
    record("url", "page with a message")
