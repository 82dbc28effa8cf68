"""The What-if page says why (issue 34, item 7): TTFT exactly 25 ms on every GPU, below TPOT, read as a bug; the page
now says the bound in words, names the H200 runs the priors come from, and shows the compiled recipe beside it."""

from __future__ import annotations

import json

from seed_runs import open_page


def test_an_overhead_bound_estimate_says_why_and_shows_the_compiled_recipe(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/whatif.py", model="demo", engine="transformers", hw="h100-sxm,rtx-4090")
    assert not at.exception
    why = " ".join(i.value for i in at.info)
    assert "Why these figures" in why
    assert "Next tokens: host overhead per step: on this engine the GPU and the model size barely change decode" in why
    assert "TTFT is the same on every GPU and can sit below TPOT" in why
    assert "from the project's NVIDIA H200 (one GPU) runs of 2026-11-29" in why and "priors_h200.json" in why
    table = at.dataframe[0].value
    assert all("50.0 ms overhead per step" in cell for cell in table["what its time is made of"])
    compared = at.dataframe[1].value
    assert list(compared["hardware"]) == ["h100-sxm", "rtx-4090"]
    assert all(float(t) < 5 for t in compared["TPOT [ms]"])  # vs ~50 ms eager
    assert any("For comparison: transformers, static cache + torch.compile" in m.value for m in at.markdown)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any((t.get("name") or "").endswith("(for comparison)") for t in fig["data"])


def test_a_memory_bound_estimate_gets_no_comparison(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/whatif.py", model="synthetic:llama-3-8b", engine="vllm", hw="h100-sxm")
    assert not at.exception
    assert "memory-bandwidth-bound" in " ".join(i.value for i in at.info)
    assert not any("For comparison" in m.value for m in at.markdown)
