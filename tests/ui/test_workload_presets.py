"""Every workload preset sends enough requests for a p50 interval (issue 34, item 9: "quick check" sent 2)."""

from __future__ import annotations

from engine.measure.stats import min_samples


def test_every_preset_sends_enough_requests_for_a_p50():
    from ui.launch_workload import WORKLOAD_PRESETS

    need = min_samples(50.0)
    assert need == 6
    short = {name: p["requests"] for name, p in WORKLOAD_PRESETS.items() if p.get("requests", need) < need}
    assert short == {}
