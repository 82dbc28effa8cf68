"""The Launch page's estimate before Submit: time and memory of the job (or the sweep) on its device."""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.whatif.job import JobEstimate, duration, earlier_runs, estimate_job
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
