"""Launch warns before Submit when an engine serving one request at a time gets more traffic than the estimate says
it can serve (issue 34, item 4: a trace sent to transformers went out up to 150 s late, with no warning)."""

from __future__ import annotations

import sys
from pathlib import Path

from seed_runs import open_page

from ui.launch_estimate import one_at_a_time_warning

sys.path.append(str(Path(__file__).resolve().parents[1] / "engine" / "whatif"))
from whatif_seed import save_cpu_measurement


def test_the_warning_in_words():
    words = one_at_a_time_warning("transformers", 4.0, (1.9, "what-if estimate on Test CPU (uncalibrated)"))
    assert "serves one request at a time: a request takes about 1.90 s here" in words
    assert "serves about 0.53 requests/s, and this traffic asks for 4.00/s" in words
    assert "the schedule will not be kept" in words and "vllm" in words
    assert one_at_a_time_warning("transformers", 0.2, (1.9, "x")) is None  # it keeps up
    unknown = one_at_a_time_warning("transformers", 4.0, "this device's speed is not measured")
    assert "keeps its schedule only if a request takes under 250 ms here" in unknown


def test_a_traces_rate_and_lengths_come_from_its_preview():
    from types import SimpleNamespace

    from ui.launch_estimate import offered

    spec = SimpleNamespace(
        workload=SimpleNamespace(arrival="batch", rate=None, traffic=SimpleNamespace(scheduled=True))
    )
    preview = SimpleNamespace(due_s=[0.0, 0.25, 0.5, 10.0], prompt_tokens=[100, 300, 200], output_tokens=[10, 30, 20])
    assert offered(spec, preview) == (0.3, 200, 20)
    assert offered(spec, "no tokenizer here") is None


def _warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


def test_launch_warns_before_submit_when_the_rate_is_more_than_one_at_a_time_can_serve(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    save_cpu_measurement(db)  # this machine's speed is known: the estimate gives a time per request
    link = {"model": "demo", "engine": "transformers", "device": "cpu", "prompt_tokens": "128", "output_tokens": "64"}
    at = open_page("views/launch.py", **link, arrival="poisson", rate="20")
    assert not at.exception
    assert "The transformers engine serves one request at a time" in _warnings(at)
    assert "this traffic asks for 20.00/s" in _warnings(at) and not at.button(key="submit").disabled
    at = open_page("views/launch.py", **link, arrival="poisson", rate="0.01")  # one request a minute and a half
    assert not at.exception and "serves one request at a time" not in _warnings(at)
    at = open_page("views/launch.py", **link)  # static batches: no rate, no schedule
    assert not at.exception and "serves one request at a time" not in _warnings(at)
