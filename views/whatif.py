"""What-if: predicted TTFT/TPOT/throughput and memory fit of a recipe on hardware you
may not own, calibrated by the runs measured here, with their error band.

State lives in the URL: ``?model=synthetic:llama-3-8b&engine=transformers&dtype=bf16&kv=auto
&bs=1&tp=1&drop=0&prompt=128&output=32&conc=&hw=h100-sxm,a100-80gb``. ``?mode=serving`` is the serving
mode, a capacity plan (:mod:`ui.whatif_serving`): replicas and cost for a traffic within an SLO.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from engine.spec import engines
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from engine.whatif.calibrate import Calibration, calibrate
from engine.whatif.estimate import (
    ENGINES,
    KV_DTYPES,
    WEIGHT_DTYPES,
    EstimateError,
    EstimateRecipe,
    EstimateWorkload,
    model_shape,
)
from engine.whatif.hardware import DEFAULT_COMPARISON, catalog
from engine.whatif.microbench import measure_in_subprocess
from engine.whatif.query import comparison_rows, table_rows, what_if
from ui import auth
from ui.common import database, parse_whole, shown
from ui.run_view import runs_changed_token, share_link
from ui.text import escape_markdown
from ui.whatif_view import chart, comparison, table

MODELS = ["demo"] + [f"synthetic:{a}" for a in SYNTHETIC_ARCHITECTURES]
LOCAL_FOLDER = "local folder..."
DEFAULTS: dict[str, Any] = {
    "model": "synthetic:llama-3-8b",
    "engine": ENGINES[0],
    "dtype": "auto",
    "kv": "auto",
    "bs": 1,
    "tp": 1,
    "drop": 0,
    "prompt": 128,
    "output": 32,
    "conc": 0,
}
INTS = {
    "bs": (1, 4096),
    "tp": (1, 16),
    "drop": (0, 1024),
    "prompt": (1, 10_000_000),
    "output": (1, 1_000_000),
    "conc": (0, 100_000),
}
LAUNCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "auto": "auto"}


def _families_help() -> str:
    """Each estimator engine in words: the summary of the engine its what-if family is named after."""
    words = {d.name: d.summary for d in engines.all_engines()}
    return "; ".join(f"{e}: {words.get(e, 'bare roofline (data-sheet peaks, no overhead)')}" for e in ENGINES)


def read_params(hardware_keys: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Query parameters validated against the defaults: (values, problems shown to the user)."""
    qp = st.query_params
    values: dict[str, Any] = dict(DEFAULTS)
    problems: list[str] = []
    for key in ("model", "engine", "dtype", "kv"):
        raw = qp.get(key)
        if raw:
            values[key] = raw.strip()
    for key, (lo, hi) in INTS.items():
        raw = qp.get(key)
        if raw in (None, ""):
            continue
        v = parse_whole(raw, lo, hi)
        if v is None:
            problems.append(f"{shown(raw)} is not a valid {key} (a whole number from {lo} to {hi})")
        else:
            values[key] = v
    if values["engine"] not in ENGINES:
        problems.append(f"unknown engine {shown(str(values['engine']))} (choose {', '.join(ENGINES)})")
        values["engine"] = DEFAULTS["engine"]
    for key, allowed in (("dtype", WEIGHT_DTYPES), ("kv", KV_DTYPES)):
        if values[key] not in allowed:
            problems.append(f"unknown precision {shown(str(values[key]))} for {key} (choose {', '.join(allowed)})")
            values[key] = DEFAULTS[key]
    raw_hw = qp.get("hw")
    default_hw = list(DEFAULT_COMPARISON) + [k for k in hardware_keys if k.startswith("local:")]
    if raw_hw:
        keys = [k.strip().lower() for k in raw_hw.split(",") if k.strip()]
        unknown = [k for k in keys if k not in hardware_keys]
        if unknown:
            problems.append(
                f"unknown hardware {', '.join(unknown)} left out"
                + (
                    " (measure local devices with the button below)"
                    if any(k.startswith("local:") for k in unknown)
                    else ""
                )
            )
        values["hw"] = [k for k in dict.fromkeys(keys) if k in hardware_keys] or default_hw
    else:
        values["hw"] = default_hw
    return values, problems


def init_state(values: dict[str, Any]) -> None:
    """Seed widget state from the URL when it is not the state this page last wrote there
    (first visit, or a permalink opened in the same session); widgets own it afterwards."""
    if st.session_state.get("_whatif_written") == st.query_params.to_dict():
        return
    model = values["model"]
    st.session_state["wi_model"] = model if model in MODELS else LOCAL_FOLDER
    st.session_state["wi_folder"] = "" if model in MODELS else model
    for key in ("engine", "dtype", "kv", "bs", "tp", "drop", "prompt", "output", "conc", "hw"):
        st.session_state[f"wi_{key}"] = values[key]


@st.cache_data(show_spinner=False, max_entries=8, ttl=3600)
def cached_calibration(_db: Any, db_url: str, token: tuple[Any, ...]) -> Calibration:
    """engine.whatif.calibrate.calibrate, cached per database, runs and measurements."""
    return calibrate(_db)


def inputs(entries: dict[str, Any]) -> dict[str, Any]:
    """The model, recipe, workload and hardware widgets; their values keyed like the URL."""
    c1, c2, c3, c4 = st.columns(4)
    model = c1.selectbox("Model", MODELS + [LOCAL_FOLDER], key="wi_model")
    if model == LOCAL_FOLDER:
        model = c1.text_input("Folder with config.json", key="wi_folder").strip()
    values: dict[str, Any] = {"model": model}
    values["engine"] = c2.selectbox("Engine", list(ENGINES), key="wi_engine", help=_families_help())
    values["dtype"] = c3.selectbox("Weights", list(WEIGHT_DTYPES), key="wi_dtype")
    values["kv"] = c4.selectbox("KV cache", list(KV_DTYPES), key="wi_kv")
    c1, c2, c3, c4, c5, c6 = st.columns(6)
    values["bs"] = int(c1.number_input("Batch size", 1, 4096, key="wi_bs"))
    values["tp"] = int(c2.selectbox("Tensor parallel", [1, 2, 4, 8, 16], key="wi_tp"))
    values["drop"] = int(
        c3.number_input("Dropped layers", 0, 1024, key="wi_drop", help="pruning: decoder layers removed")
    )
    values["prompt"] = int(c4.number_input("Prompt tokens", 1, 10_000_000, key="wi_prompt"))
    values["output"] = int(c5.number_input("Output tokens", 1, 1_000_000, key="wi_output"))
    values["conc"] = int(c6.number_input("Concurrency (0 = one batch)", 0, 100_000, key="wi_conc"))
    values["hw"] = st.multiselect(
        "Hardware", list(entries), key="wi_hw", format_func=lambda k: f"{k}: {entries[k].name}"
    )
    return values


def write_params(values: dict[str, Any]) -> None:
    """The widgets' state into the URL (so the view is a link), remembered as this page's own."""
    params = {k: (",".join(v) if k == "hw" else str(v)) for k, v in values.items()}
    st.query_params.from_dict(params)
    st.session_state["_whatif_written"] = st.query_params.to_dict()


def compute(db: Any, entries: dict[str, Any], values: dict[str, Any]) -> tuple[Any, Any] | None:
    """(model shape, what-if result), or None after a warning when the input cannot be estimated."""
    try:
        shape = model_shape(values["model"])
        recipe = EstimateRecipe(
            engine=values["engine"],
            dtype=values["dtype"],
            kv_dtype=values["kv"],
            batch_size=values["bs"],
            tp=values["tp"],
            drop_layers=values["drop"],
        )
        shape.dropped(recipe.drop_layers)
        workload = EstimateWorkload(
            prompt_tokens=values["prompt"], output_tokens=values["output"], concurrency=values["conc"] or None
        )
        cal = Calibration(groups=[])
        if db is not None:
            from storage.hardware import latest_per_device

            token = (runs_changed_token(db), tuple(m.id for m in latest_per_device(db)))
            cal = cached_calibration(db, db.url, token)
        hardware = [entries[k] for k in values["hw"]]
        return shape, what_if(shape, values["model"], hardware, recipe, workload, calibration=cal)
    except EstimateError as exc:
        st.warning(f"Cannot estimate this: {escape_markdown(exc)}")
        return None


def calibration_notes(rows: list[dict[str, Any]], result: Any) -> None:
    """Each entry's calibration in words, which calibration each row used, and the runs left out."""
    st.markdown(
        "**Calibration per hardware entry**\n"
        + "\n".join(f"- {r['hardware']}: {r['calibration_status']}" for r in rows)
    )
    for label in dict.fromkeys(r["calibration"] for r in rows):
        (st.info if label.startswith("uncalibrated") else st.caption)(label)
    skipped = result.calibration.skipped
    if skipped:
        with st.expander(result.calibration.left_out):
            st.caption(
                "Left out of the fit and of the measured overlay: the estimator does not model these "
                "recipes or workloads, so fitting them would distort the factors and the error band."
            )
            st.dataframe(pd.DataFrame(skipped, columns=["run", "reason"]), hide_index=True)


def _launch_engine(family: str) -> str:
    """The engine a Launch link runs for an estimator engine: the first of that what-if family, else the default."""
    return next((d.name for d in engines.all_engines() if d.whatif.family == family), engines.default().name)


def measure_here(db: Any, values: dict[str, Any]) -> None:
    """A Launch link for the real benchmark and the CPU micro-benchmark button."""
    st.subheader("Measure here")
    engine = values["engine"]
    launch = urlencode(
        {
            "model": values["model"],
            "engine": _launch_engine(engine),
            "dtype": LAUNCH_DTYPE.get(values["dtype"], "auto"),
            "batch_size": values["bs"],
            **({"drop_layers": values["drop"]} if values["drop"] else {}),
            "prompt_tokens": values["prompt"],
            "output_tokens": values["output"],
            "device": "cpu",
        }
    )
    st.markdown(f"[:material/rocket_launch: Launch the real benchmark on a local device](launch?{launch})")
    why_not = auth.cannot("calibrate")
    if st.button(
        "Run the calibration micro-benchmark (CPU, a few seconds)",
        disabled=why_not is not None or db is None,
        help=why_not or "copy bandwidth and matmul throughput of this machine's CPU, stored for local:cpu",
    ):
        if auth.cannot("calibrate"):  # asked again: the button is not the only way here
            return
        with st.spinner("measuring..."):
            ok, message = measure_in_subprocess(db.url, "cpu")
        if ok:
            st.success(escape_markdown(message))
            cached_calibration.clear()
        else:
            st.error(f"The micro-benchmark failed: {escape_markdown(message)}")


def hardware_sources(entries: dict[str, Any], hw_keys: list[str]) -> None:
    """Where each picked hardware entry's figures come from."""
    rows = [
        {
            "key": k,
            "name": entries[k].name,
            "memory GB": entries[k].memory_gb,
            "bandwidth GB/s": entries[k].bandwidth_gbs,
            "bf16 TFLOP/s": entries[k].tflops.get("bf16"),
            "fp8 TFLOP/s": entries[k].tflops.get("fp8"),
            "interconnect": entries[k].interconnect,
            "source": entries[k].source,
        }
        for k in hw_keys
    ]
    with st.expander("Hardware sources"):
        st.dataframe(pd.DataFrame(rows), hide_index=True)


MODES = {"estimate": "Estimate (one batch)", "serving": "Serving: capacity plan"}


def mode_switch() -> str:
    """Estimate or serving (capacity plan), from ``?mode=``; switching mode starts from that mode's defaults."""
    mode = st.query_params.get("mode", "estimate")
    mode = mode if mode in MODES else "estimate"
    if st.session_state.get("wi_mode_seen") != mode:
        st.session_state["wi_mode"] = st.session_state["wi_mode_seen"] = mode
    chosen = st.segmented_control("Mode", list(MODES), format_func=MODES.get, key="wi_mode") or mode
    if chosen != mode:
        st.query_params.from_dict({} if chosen == "estimate" else {"mode": chosen})
        st.session_state["wi_mode_seen"] = chosen
    return chosen


def page() -> None:
    """The what-if page: inputs from the URL, estimates, overlay, calibration, measure here; or the serving mode."""
    st.title("What-if: hardware you don't own")
    if mode_switch() == "serving":
        from ui.whatif_serving import render

        db = database()
        render(db, catalog(db))
        share_link("whatif")
        return
    st.caption(
        "Roofline estimates (prefill compute-bound, decode memory-bound, with the engine's launch "
        "overheads), calibrated by the comparable runs measured here; each row says what bounds it. Data-sheet "
        "figures are vendor claims."
    )
    db = database()
    entries = catalog(db)
    values, problems = read_params(list(entries))
    for p in problems:
        st.warning(f"{p}; using the default instead.")
    init_state(values)
    values = inputs(entries)
    write_params(values)
    if not values["model"]:
        st.info("Give a local folder that holds a config.json, or pick a catalog model.")
        return
    if not values["hw"]:
        st.info("Pick at least one hardware entry.")
        return
    computed = compute(db, entries, values)
    if computed is None:
        return
    shape, result = computed
    rows = table_rows(result)
    st.caption(
        f"{escape_markdown(values['model'])}: {shape.params / 1e9:.3f} B parameters, {shape.layers} layers, "
        f"KV {shape.kv_heads} heads x {shape.head_dim}"
    )
    for r in rows:
        if not r["fits"]:
            st.warning(
                f"**{escape_markdown(r['hardware'])}** ({escape_markdown(r['name'])}): {escape_markdown(r['fit'])}",
                icon=":material/memory:",
            )
    table(rows)
    compared = comparison_rows(result)  # an overhead-bound estimate beside a recipe that is not
    st.plotly_chart(chart(rows, compared), width="stretch")
    comparison(compared)
    calibration_notes(rows, result)
    measure_here(db, values)
    hardware_sources(entries, values["hw"])
    share_link("whatif")


page()
