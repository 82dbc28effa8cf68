"""The Launch page's estimate before Submit: time and memory of the job (or the sweep) on its device."""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.spec import engines
from engine.whatif.job import (
    JobEstimate,
    duration,
    earlier_runs,
    estimate_job,
    seconds_per_request,
    serves_one_at_a_time,
)
from ui.text import escape_markdown


@st.cache_resource(ttl=120, show_spinner=False)
def _calibration(url: str, _db: Any) -> Any:
    """The what-if calibration from the stored runs (fitted at most every two minutes)."""
    from engine.whatif.calibrate import calibrate

    return calibrate(_db)


def estimates(db: Any, specs: list[Any], device: Any | None) -> list[JobEstimate]:
    """One estimate per spec; earlier runs are read once per model."""
    calibration = _calibration(str(getattr(db, "url", id(db))), db)
    earlier: dict[str, list[Any]] = {}
    out = []
    for spec in specs:
        data = spec.model_dump(mode="json")
        source = data["model"]["source"]
        if source not in earlier:
            earlier[source] = earlier_runs(db, data)
        out.append(
            estimate_job(
                data,
                db,
                device_name=device.name if device else "",
                memory_bytes=device.memory_total_bytes if device else None,
                calibration=calibration,
                earlier=earlier[source],
            )
        )
    return out


def _measure_button(db: Any, device: str) -> None:
    """Measure this machine's device here (a few seconds), so the estimate gets a time without a detour."""
    from ui import auth

    why_not = auth.cannot("calibrate")
    target = device.split(",")[0]
    if st.button(
        f"Measure this machine's {target} now (a few seconds)",
        key="launch_measure",
        disabled=why_not is not None,
        help=why_not or "copy bandwidth and matmul throughput, stored for every later estimate",
        icon=":material/speed:",
    ):
        from engine.whatif.microbench import measure_in_subprocess

        if auth.cannot("calibrate"):  # asked again: the button is not the only way here
            return
        with st.spinner("measuring..."):
            ok, message = measure_in_subprocess(db.url, target)
        (st.success if ok else st.error)(escape_markdown(message))
        if ok:
            _calibration.clear()
            st.rerun()


def estimate_panel(db: Any, specs: list[Any], device: Any | None) -> None:
    """ "Estimate: about 4 min; needs 17 GB ..." with its parts, what is unknown, and loud warnings."""
    if not specs:
        return
    found = estimates(db, specs, device)
    first = found[0]
    if len(found) == 1:
        st.info(f"Estimate: {escape_markdown(first.summary())}", icon=":material/timer:")
    else:
        known = [e.seconds for e in found if e.seconds is not None]
        total = (
            f"about {duration(sum(known))} in all"
            if len(known) == len(found)
            else (
                f"time unknown for {len(found) - len(known)} of them"
                + (f" (the others about {duration(sum(known))})" if known else "")
            )
        )
        memory = max((e.memory_bytes for e in found if e.memory_bytes is not None), default=None)
        peak = f"; the largest needs {memory / 2**30:,.1f} GiB" if memory is not None else ""
        st.info(f"Estimate: {len(found)} jobs, {total}{peak}.", icon=":material/timer:")
    details = [*first.parts, *first.unknown]
    if details:
        st.caption(escape_markdown(" · ".join(details)))
    if any("speed is not measured" in u for e in found for u in e.unknown):
        _measure_button(db, specs[0].device)
    for warning in dict.fromkeys(w for e in found for w in e.warnings):
        st.warning(escape_markdown(warning), icon=":material/warning:")
    _one_at_a_time(db, specs[0], device)


def offered(spec: Any, preview: Any | None) -> tuple[float, int | None, int | None] | None:
    """(requests per second the traffic asks for, median prompt and output tokens where the preview planned them),
    or None for traffic without a rate (a closed loop, static batches)."""
    import statistics

    wl = spec.workload
    lengths: tuple[int | None, int | None] = (None, None)
    if preview is not None and not isinstance(preview, str) and preview.prompt_tokens:
        lengths = (int(statistics.median(preview.prompt_tokens)), int(statistics.median(preview.output_tokens or [0])))
    if wl.arrival in ("poisson", "gamma") and wl.rate:
        return float(wl.rate), *lengths
    due = [] if preview is None or isinstance(preview, str) else list(preview.due_s)
    if wl.traffic.scheduled and len(due) > 1 and max(due) > min(due):
        return (len(due) - 1) / (max(due) - min(due)), *lengths
    return None


def one_at_a_time_warning(engine: str, rate: float, per_request: tuple[float, str] | str) -> str | None:
    """The warning before Submit when an engine that serves one request at a time gets more than it can serve
    (pure); None when the estimate says it keeps up. Unknown speed: what a request would have to take."""
    serving = ", ".join(engines.with_capability("serving"))
    if isinstance(per_request, str):
        return (
            f"The {engine} engine serves one request at a time: this traffic ({rate:,.2f} requests/s) keeps its "
            f"schedule only if a request takes under {duration(1 / rate) if rate <= 1 else f'{1000 / rate:,.0f} ms'} "
            f"here, and the time per request is unknown ({per_request})."
        )
    seconds, source = per_request
    capacity = 1 / seconds if seconds > 0 else float("inf")
    if rate <= capacity:
        return None
    return (
        f"The {engine} engine serves one request at a time: a request takes about {seconds:,.2f} s here ({source}), "
        f"so it serves about {capacity:,.2f} requests/s, and this traffic asks for {rate:,.2f}/s. Requests will go "
        "out later and later: the schedule will not be kept, and the Run page will lead with latency from the due "
        f"time. Lower the rate, slow the trace down (time scale), or use a serving engine ({serving})."
    )


def _one_at_a_time(db: Any, spec: Any, device: Any | None) -> None:
    """Warn before Submit when the engine serves one request at a time and the traffic asks for more."""
    data = spec.model_dump(mode="json")
    if not serves_one_at_a_time(data):
        return
    preview = None
    if spec.workload.traffic.scheduled:
        from ui.traffic_view import checked_preview

        preview = checked_preview(spec)[0]  # cached: the page planned it already
    asked = offered(spec, preview)
    if asked is None:
        return
    rate, prompt, output = asked
    per_request = seconds_per_request(
        data,
        db,
        prompt_tokens=prompt,
        output_tokens=output,
        device_name=device.name if device else "",
        memory_bytes=device.memory_total_bytes if device else None,
        calibration=_calibration(str(getattr(db, "url", id(db))), db),
    )
    words = one_at_a_time_warning(data["recipe"]["engine"], rate, per_request)
    if words is None:
        return
    (st.caption if isinstance(per_request, str) else st.warning)(escape_markdown(words))


def study_words(per_trial: JobEstimate, trials: int, max_minutes: float | None = None) -> str:
    """``about 40 min for 10 trials (each about 4 min, as long as the base recipe ...)`` (pure); a study with a
    time budget stops at it."""
    cap = f"; the budget stops it at {duration(max_minutes * 60)}" if max_minutes else ""
    if per_trial.seconds is None:
        return f"time unknown for {trials} trials (the base recipe's time is unknown){cap}"
    plus = " plus the model loads" if not per_trial.load_known else ""
    return (
        f"about {duration(per_trial.seconds * trials)}{plus} for {trials} trial{'s' if trials != 1 else ''} "
        f"(each about {duration(per_trial.seconds)}, as long as the base recipe; a faster recipe takes less){cap}"
    )


def study_estimate(db: Any, base: Any, trials: int, max_minutes: float | None = None) -> None:
    """The Optimize page's estimate before "Create study": the base recipe's job estimate times the trials."""
    from engine.measure.devices import detect_devices

    first = str(base.device).split(",")[0]
    device = next((d for d in detect_devices() if d.id == first), None)
    (per_trial,) = estimates(db, [base], device)
    st.info(f"Estimate: {escape_markdown(study_words(per_trial, trials, max_minutes))}.", icon=":material/timer:")
    details = [*per_trial.parts, *per_trial.unknown]
    if details:
        st.caption(escape_markdown(" · ".join(details)))
