"""The Launch page's hardware picker: this machine's CPU and GPUs, a GPU group, and a Ray cluster's
devices when the app is configured with one (``LATENCYLAB_RAY_ADDRESS``; engine/jobs/cluster_devices.py)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.measure import devices as device_list
from ui.text import escape_markdown


def device_picker(db: Any, disabled: bool) -> tuple[str, Any]:
    """(the device string, this machine's Device of its first GPU or the CPU; None when not here)."""
    from storage import jobs

    devices = device_list.detect_devices()  # looked up when called: tests replace it
    running = jobs.busy_devices(db)
    labels = {}
    for d in devices:
        extra = f" (running job {running[d.id]})" if d.id in running else ""
        labels[d.id] = d.label + extra
    cluster_gpus = _cluster_devices(labels)
    device = st.selectbox(
        "Hardware",
        list(labels),
        format_func=labels.get,
        key="device",
        disabled=disabled,
        help="The CPU and every CUDA GPU NVML sees (a busy GPU runs another program), and a Ray cluster's devices "
        "when LATENCYLAB_RAY_ADDRESS is set.",
    )
    gpus = [d.id for d in devices if d.kind == "cuda"] or cluster_gpus
    if len(gpus) > 1:
        group = st.multiselect(
            "or a GPU group (tensor parallelism)",
            gpus,
            key="device_group",
            disabled=disabled,
            help="Two or more GPUs run the job together as one worker slot (cuda:0+1).",
        )
        if len(group) > 1:
            ordered = sorted(group, key=lambda g: int(g.split(":")[1]))
            here = next((d for d in devices if d.id == ordered[0]), None)  # None: a cluster's GPUs
            return "cuda:" + ",".join(g.split(":", 1)[1] for g in ordered), here
    return device, next((d for d in devices if d.id == device), None)


def _cluster_devices(labels: dict[str, str]) -> list[str]:
    """Add the configured Ray cluster's devices to ``labels`` (its summary in each label); its GPUs."""
    from engine.jobs.cluster_devices import cluster_devices

    cluster = cluster_devices()
    if cluster is None:
        return []
    if cluster.problem:
        st.caption(f"Ray cluster: {escape_markdown(cluster.problem)}")
        return []
    for dev in cluster.devices:
        here = f"{labels[dev]} here, or " if dev in labels else ""
        labels[dev] = f"{dev} · {here}{cluster.summary}"
    return [d for d in cluster.devices if d.startswith("cuda:")]
