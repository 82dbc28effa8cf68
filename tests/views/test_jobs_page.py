"""Jobs page (AppTest): statuses, live progress, log tail, run link, cancel/retry, viewer mode."""

from __future__ import annotations

import pytest
from seed_runs import open_page

from engine.spec import parse_job_spec
from storage import jobs


def _spec(seed: int):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "seed": seed},
        }
    )


@pytest.fixture
def queue(db):
    """One job in each state: queued, running (measuring), done, failed."""
    done, failed, running, queued = jobs.submit_many(db, [_spec(i) for i in range(4)], sweep="s")
    for job_id in (done, failed, running):
        jobs.claim(db, "w1", ["cpu"])
        jobs.mark_started(db, job_id, "w1")
    jobs.progress(db, running, phase="measuring", fraction=0.42, note="2 request(s)", eta_s=7.0, measuring_started=True)
    jobs.set_log_tail(db, running, "loaded demo in 0.5 s\n")
    jobs.set_result(db, done, run_id=17)
    jobs.finish(db, done, "w1", "done", log_tail="done: run 17\n")
    jobs.finish(db, failed, "w1", "failed", error="killed by signal 9 (SIGKILL)")
    return {"done": done, "failed": failed, "running": running, "queued": queued}


def _open(monkeypatch, db_url, viewer: bool = False):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    if viewer:
        monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "1")
    get_settings.cache_clear()
    at = open_page("views/jobs.py")
    assert not at.exception
    return at


@pytest.fixture(autouse=True)
def _reset_settings():
    yield
    from engine.settings import get_settings

    get_settings.cache_clear()


def test_every_job_with_status_progress_and_actions(queue, db_url, monkeypatch):
    at = _open(monkeypatch, db_url)
    text = " ".join(m.value for m in at.markdown)
    for job_id in queue.values():
        assert f"Job {job_id}" in text
    [bar] = at.get("progress")
    assert "measuring" in bar.proto.text and "42%" in bar.proto.text and "left" in bar.proto.text
    assert "run?run=17" in text and "/runs?run=17" not in text
    assert any("killed by signal 9" in e.value for e in at.error)
    keys = {b.key for b in at.button}
    assert {f"cancel_{queue['queued']}", f"cancel_{queue['running']}", f"retry_{queue['failed']}"} <= keys
    assert f"cancel_{queue['done']}" not in keys and f"retry_{queue['done']}" not in keys
    assert any("loaded demo" in c.value for c in at.code)


def test_cancel_and_retry_buttons(queue, db, db_url, monkeypatch):
    at = _open(monkeypatch, db_url)
    at.button(key=f"cancel_{queue['queued']}").click().run()
    assert jobs.get_job(db, queue["queued"]).status == "cancelled"
    at.button(key=f"cancel_{queue['running']}").click().run()
    assert jobs.get_job(db, queue["running"]).cancel_requested
    before = len(jobs.list_jobs(db))
    at.button(key=f"retry_{queue['failed']}").click().run()
    assert not at.exception
    assert len(jobs.list_jobs(db)) == before + 1


def test_viewer_mode_has_no_buttons(queue, db_url, monkeypatch):
    at = _open(monkeypatch, db_url, viewer=True)
    assert len(at.button) == 0
    assert any("read-only" in i.value for i in at.info)


def test_empty_and_filtered(db, db_url, monkeypatch):
    at = _open(monkeypatch, db_url)
    assert any("No jobs yet" in i.value for i in at.info)
    assert any("No live worker" in w.value for w in at.warning)


IMAGE = "![b](http://127.0.0.1:9/x.png)"


def _rendered(value: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(value)


def test_user_text_is_shown_literally_never_as_markup(db, db_url, monkeypatch):
    """A job name (and a reason) that is Markdown for a remote image shows as typed: no image element."""
    import html

    spec = parse_job_spec({"model": {"source": "demo"}, "name": IMAGE, "workload": {"prompt_tokens": 8}})
    job_id = jobs.submit(db, spec, sweep=f"s {IMAGE}")
    jobs.claim(db, "w1", ["cpu"])
    jobs.mark_started(db, job_id, "w1")
    jobs.finish(db, job_id, "w1", "failed", error=f"server said {IMAGE} **now**")
    at = _open(monkeypatch, db_url)
    bodies = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
    rendered = "\n".join(_rendered(b) for b in bodies)
    assert "<img" not in rendered and "<strong>now" not in rendered
    assert html.unescape(rendered).count(IMAGE) >= 3  # the name, the sweep and the reason, as typed


def test_job_cards_name_only_what_differs_from_the_defaults(db, db_url, monkeypatch):
    plain = parse_job_spec({"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 4}})
    tuned = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", "dtype": "bfloat16", "drop_layers": 4},
            "workload": {"prompt_tokens": 16, "output_tokens": 4},
        }
    )
    jobs.submit_many(db, [plain, tuned])
    at = _open(monkeypatch, db_url)
    cards = [c.value for c in at.caption if c.value.startswith("demo")]
    assert any("transformers · defaults" in c for c in cards), cards
    [knobs] = [c for c in cards if "bfloat16" in c]
    assert "dtype bfloat16" in knobs and "drop layers 4" in knobs
    # knobs at their defaults are not listed (the old card listed every knob that was not None or auto)
    assert all(word not in knobs for word in ("gptq", "compile", "batching", "num speculative", "trust"))


def test_a_queued_job_says_what_it_waits_for_and_a_finishing_one_is_not_done(db, db_url, monkeypatch):
    """Issue 26, item 5: Jobs said "waiting for a worker that serves cpu" while that worker was busy with the
    job before it, showed `running` beside "done · 100 %", and its log tail held torchao's
    "Failed to load ..._C_mxfp8..." lines and "TTFT p50 322.91799149999997 ms"."""
    from engine.jobs.job_process import done_line

    first, second = jobs.submit_many(db, [_spec(1), _spec(2)])
    jobs.register_worker(db, "w1", "host", 1, ["cpu"])
    jobs.claim(db, "w1", ["cpu"])
    jobs.mark_started(db, first, "w1")
    jobs.progress(db, first, phase="done", fraction=1.0)
    line = done_line(3, {"ttft_ms": {"p50": 322.91799149999997}, "output_tokens_per_s": 24.71234})
    noise = "Failed to load /venv/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: Could not load"
    jobs.set_log_tail(db, first, f"{noise}\nloaded demo in 0.5 s\n{line}\n")
    at = _open(monkeypatch, db_url)
    captions = " ".join(c.value for c in at.caption)
    assert f"queued behind job {first}, running on cpu" in captions
    assert "waiting for a worker" not in captions
    progress = at.get("progress")[0].proto.text
    assert progress.startswith("finishing: storing the run · 100%") and "done" not in progress
    log = " ".join(c.value for c in at.code)
    assert "Failed to load" not in log and "TTFT p50 322.9 ms, 24.7 tok/s" in log and "322.917" not in log
