"""The client keeping itself quick: the cyclic collector paused for a measured phase."""

from __future__ import annotations


def test_a_phase_pauses_the_cyclic_collector_and_gives_it_back() -> None:
    import gc

    from engine.measure.client_lag import pause_gc, resume_gc

    assert gc.isenabled()
    paused = pause_gc()
    try:
        assert paused and not gc.isenabled() and gc.get_freeze_count() > 0
        assert pause_gc() is False  # already off: a nested pause leaves it to the outer one
    finally:
        resume_gc(paused)
        gc.unfreeze()
    assert gc.isenabled()
