"""The What-if page's serving mode: a capacity plan for a traffic within an SLO, over recipes x hardware x TP.

State lives in the URL (``?mode=serving&model=synthetic:llama-3-8b&engine=vllm&source=synthetic
&traffic={"prompt_tokens":512}&output=128&rate=50&ttft=500&tpot=50&pct=90&variants=base;fp8:kv_cache_dtype=fp8
&hw=h100-sxm,a100-80gb,l40s&tp=1&price=h100-sxm=4.5&y=replicas``), so a plan's question is a link; its answer
is computed when Run is pressed (up to minutes: progress is shown per configuration) and kept for the session,
never stored. Run is disabled, with the reason, while the question cannot be planned.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import streamlit as st

from engine.jsonvalue import JSONObject, JSONValue
from engine.spec import JobSpec, SpecError, engines, forms, parse_job_spec, sources
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from engine.whatif.capacity.configs import Prepared, prepared, recalibrated, variants_of
from engine.whatif.capacity.cost import parse_prices
from engine.whatif.capacity.planner import CHART_SCALES, CapacityPlan, calibrator, plan_capacity
from engine.whatif.capacity.sizing import Capacity
from engine.whatif.capacity.slo import CapacitySLO, SloError
from engine.whatif.capacity.traffic import TrafficError
from engine.whatif.hardware import Hardware
from engine.whatif.predict.calibration import uncalibrated
from ui.capacity_view import answer, charts
from ui.launch_form import section_form
from ui.text import escape_markdown

if TYPE_CHECKING:
    from storage import Database

MODELS = ["demo"] + [f"synthetic:{a}" for a in SYNTHETIC_ARCHITECTURES]
TEXT_DEFAULTS: dict[str, str] = {
    "model": "synthetic:llama-3-8b",
    "engine": "",  # filled by defaults(): the first engine the serving simulator models with continuous batching
    "source": "synthetic",
    "traffic": "",
    "output": "128",
    "rate": "20",
    "sample": "1000",
    "ttft": "500",
    "tpot": "50",
    "e2el": "",
    "pct": "90",
    "goodput": "",
    "variants": "base",
    "hw": "h100-sxm,a100-80gb,l40s",
    "tp": "1",
    "price": "",
    "y": "replicas",
}
TPS = [1, 2, 4, 8]


def defaults() -> dict[str, str]:
    """The form's first values: :data:`TEXT_DEFAULTS`, the engine the first that the serving simulator models with
    continuous batching (a serving engine: its descriptor says so)."""
    serving = [d.name for d in engines.all_engines() if d.whatif.serving and d.whatif.serving.batching == "continuous"]
    return {**TEXT_DEFAULTS, "engine": next(iter(serving), engine_choices()[0])}


def engine_choices() -> list[str]:
    """The engines the serving simulator models (the vllm and transformers what-if families)."""
    return [d.name for d in engines.all_engines() if d.whatif.serving is not None]


def read_params() -> dict[str, str]:
    """The serving mode's URL state, each value as text (the widgets and :func:`question` check them)."""
    qp = st.query_params
    return {k: (qp.get(k) if qp.get(k) is not None else d) for k, d in defaults().items()}


def init_state(values: dict[str, str], entries: dict[str, Hardware]) -> list[str]:
    """Seed the widgets from the URL unless it is what this mode last wrote (a link opened, a first visit);
    what the link named that is not a choice is said (a line each) and left at its default."""
    if st.session_state.get("_capacity_written") == st.query_params.to_dict():
        return []
    for key in [k for k in st.session_state if str(k).startswith("cap_tr_")]:
        del st.session_state[key]  # the source's own fields: seeded again from the link's traffic
    for key, value in values.items():
        st.session_state[f"cap_{key}"] = value
    said = []
    for key, choices in (("model", MODELS), ("engine", engine_choices()), ("y", ["replicas", "cost"])):
        if values[key] not in choices:
            said.append(f"{key} {values[key][:40]!r} is not one of the choices; using {defaults()[key]}")
            st.session_state[f"cap_{key}"] = defaults()[key]
    keys = [k.strip().lower() for k in values["hw"].split(",") if k.strip()]
    said += [f"unknown hardware {k[:40]!r} left out" for k in keys if k not in entries]
    st.session_state["cap_hw_list"] = [k for k in dict.fromkeys(keys) if k in entries]
    tps = [t.strip() for t in values["tp"].split(",") if t.strip()]
    st.session_state["cap_tp_list"] = [int(t) for t in tps if t.isdigit() and int(t) in TPS] or [1]
    return said


def _traffic_defaults(values: dict[str, str]) -> tuple[JSONObject, str | None]:
    """The link's traffic options (a JSON object), or none and why it could not be read."""
    if not values["traffic"].strip():
        return {}, None
    try:
        data = json.loads(values["traffic"])
    except ValueError:
        return {}, "the link's traffic is not a JSON object; the source's defaults are shown"
    return (data, None) if isinstance(data, dict) else ({}, "the link's traffic is not a JSON object")


def traffic_inputs(values: dict[str, str]) -> tuple[dict[str, str], JSONObject, list[str]]:
    """The traffic: its source, the source's own options (any registered source), output tokens, peak rate."""
    choices = forms.traffic_choices()
    c1, c2, c3, c4 = st.columns(4)
    if st.session_state.get("cap_source") not in choices:
        st.session_state["cap_source"] = "synthetic"
    source = c1.selectbox("Traffic", list(choices), format_func=choices.get, key="cap_source")
    cls = sources.get(source)
    out = dict(values, source=source)
    out["output"] = c2.text_input("Output tokens", key="cap_output", disabled=cls.scheduled)
    out["rate"] = c3.text_input(
        "Peak rate (requests/s)", key="cap_rate", disabled=cls.scheduled, help="a trace brings its own schedule"
    )
    out["sample"] = c4.text_input("Requests simulated per probe", key="cap_sample")
    defaults, problem = _traffic_defaults(values)
    problems = [problem] if problem else []
    start = {n: defaults.get(n, f.get_default(call_default_factory=True)) for n, f in cls.model_fields.items()}
    options, more = section_form(
        forms.traffic_section(source), cls, start, f"cap_tr_{source}_", False, order=cls.option_names()
    )
    changed = {k: v for k, v in options.items() if v != cls.model_fields[k].get_default(call_default_factory=True)}
    out["traffic"] = json.dumps(changed, separators=(",", ":")) if changed else ""
    return out, {"source": source, **options}, problems + more


def slo_inputs(values: dict[str, str]) -> dict[str, str]:
    """The SLO: limits in ms (blank: none), the percentile they hold at, or a goodput share instead."""
    c1, c2, c3, c4, c5 = st.columns(5)
    out = dict(values)
    out["ttft"] = c1.text_input("SLO: TTFT [ms]", key="cap_ttft", help="blank: no limit")
    out["tpot"] = c2.text_input("SLO: TPOT [ms] (GenAI-Perf: ITL)", key="cap_tpot", help="blank: no limit")
    out["e2el"] = c3.text_input("SLO: E2E latency [ms]", key="cap_e2el", help="blank: no limit")
    out["pct"] = c4.text_input("at percentile", key="cap_pct")
    out["goodput"] = c5.text_input(
        "or goodput share", key="cap_goodput", help="e.g. 0.95: that share of requests meets every limit"
    )
    return out


def config_inputs(values: dict[str, str], entries: dict[str, Hardware]) -> dict[str, str]:
    """Configurations (recipe variants x hardware x TP) and the prices, each an assumption said as one."""
    out = dict(values)
    c1, c2 = st.columns(2)
    out["model"] = c1.selectbox("Model", MODELS, key="cap_model")
    out["engine"] = c2.selectbox("Engine", engine_choices(), key="cap_engine")
    out["variants"] = st.text_input(
        "Recipe variants (NAME or NAME:KNOB=VALUE,..., separated by ;)",
        key="cap_variants",
        help="e.g. base;fp8:kv_cache_dtype=fp8 (the knobs: python -m engine knobs)",
    )
    c1, c2 = st.columns([3, 1])
    hw = c1.multiselect("Hardware", list(entries), key="cap_hw_list", format_func=lambda k: f"{k}: {entries[k].name}")
    tps = c2.multiselect("Tensor parallel", TPS, key="cap_tp_list")
    out["hw"], out["tp"] = ",".join(hw), ",".join(str(t) for t in tps)
    listed = ", ".join(
        f"{k} ${entries[k].price_per_hour:g}/h" if entries[k].price_per_hour else f"{k}: none" for k in hw
    )
    out["price"] = st.text_input(
        "Prices, USD per device-hour (your assumption; blank: the catalog's list price)",
        key="cap_price",
        help=f"e.g. h100-sxm=4.5,l40s=1.9. Catalog: {listed or 'pick hardware'}; sources in the notes below.",
    )
    return out


def write_params(values: dict[str, str]) -> None:
    """The whole question into the URL (so a link keeps its meaning if defaults change; a blank that is the
    default left out), remembered as this mode's own."""
    params = {"mode": "serving", **{k: v for k, v in values.items() if v or defaults().get(k)}}
    st.query_params.from_dict(params)
    st.session_state["_capacity_written"] = st.query_params.to_dict()


def _number(text: str, what: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise SloError(f"{what} {text.strip()[:20]!r} is not a number") from None


def slo_of(values: dict[str, str]) -> CapacitySLO:
    """The SLO the inputs state (:class:`SloError` in one line)."""
    pct = _number(values["pct"], "the percentile")
    return CapacitySLO(
        _number(values["ttft"], "TTFT"),
        _number(values["tpot"], "TPOT"),
        _number(values["e2el"], "E2E"),
        90.0 if pct is None else pct,
        _number(values["goodput"], "the goodput share"),
    )


def spec_of(values: dict[str, str], traffic: JSONObject, gpu: bool) -> JobSpec:
    """The job the inputs describe: the model, the engine's recipe as given, the traffic (SpecError)."""
    workload: dict[str, JSONValue] = {"traffic": traffic, "warmup_requests": 0}
    if not sources.get(str(traffic["source"])).scheduled:
        try:
            rate, output, sample = float(values["rate"]), int(values["output"]), int(values["sample"])
        except ValueError:
            raise SpecError("the peak rate, output tokens and requests per probe must be numbers") from None
        workload.update(arrival="poisson", rate=rate, output_tokens=output, requests=sample)
    data = {
        "model": {"source": values["model"]},
        "recipe": {"engine": values["engine"]},
        "workload": workload,
        "device": "cuda:0" if gpu else "cpu",
        "quality": {"metrics": []},
    }
    return parse_job_spec(data)


class Question:
    """Everything a plan needs from the inputs, or why it cannot be planned (Run's reason)."""

    def __init__(self, values: dict[str, str], traffic: JSONObject, entries: dict[str, Hardware]) -> None:
        self.values = values
        self.hardware = [entries[k] for k in values["hw"].split(",") if k in entries]
        self.tps: list[int | None] = [int(t) for t in values["tp"].split(",") if t] or [None]
        self.slo = slo_of(values)
        self.variants = variants_of([v for v in values["variants"].split(";") if v.strip()])
        self.prices = parse_prices(values["price"])
        if not self.hardware:
            raise ValueError("pick at least one hardware entry")
        self.spec = spec_of(values, traffic, any(h.kind == "gpu" for h in self.hardware))
        self.sample = int(values["sample"]) if values["sample"].strip().isdigit() else 1000

    def key(self, traffic: JSONObject) -> str:
        """What the check depends on: the inputs, the hardware entries' figures, the input file's size and time."""
        path = self.spec.workload.traffic.input_path()
        try:
            stat = os.stat(os.path.expanduser(path)) if path else None
        except OSError:
            stat = None
        stamp = [path, stat.st_size, stat.st_mtime_ns] if stat else [path]
        hardware = [h.to_dict() for h in self.hardware]
        values = {k: v for k, v in self.values.items() if k != "y"}
        return json.dumps([values, traffic, stamp, hardware], sort_keys=True, default=str)


@st.cache_resource(show_spinner="Planning the traffic ...", max_entries=8, ttl=3600)
def _checked(key: str, _question: Question) -> Prepared:
    """The question's traffic planned and configurations prepared, uncalibrated (fast), once per ``key``."""
    q = _question
    return prepared(q.spec, q.variants, q.hardware, q.tps, uncalibrated, q.prices, sample=q.sample)


def checked(
    values: dict[str, str], traffic: JSONObject, entries: dict[str, Hardware]
) -> tuple[tuple[Question, Prepared] | None, str]:
    """The question and its configurations' check (left out, in one line each), or why Run is disabled."""
    try:
        question = Question(values, traffic, entries)
        ready = _checked(question.key(traffic), question)
    except (SloError, SpecError, TrafficError, ValueError) as exc:
        return None, str(exc).splitlines()[0]
    for x in ready.left_out:
        st.warning(escape_markdown(f"Left out: {x.label}: {x.reason}"), icon=":material/memory:")
    if not ready.configs:
        return None, "no configuration can hold this traffic (each is left out above)"
    return (question, ready), ""


def run_plan(db: Database | None, question: Question, checked_ready: Prepared) -> CapacityPlan:
    """The search, each configuration calibrated from ``db``'s runs, with its progress shown while it runs."""
    with st.status("Planning: calibrating and sizing each configuration ...", expanded=True) as status:
        calibrate = calibrator(db, status.write) if db is not None else uncalibrated
        ready = recalibrated(checked_ready, calibrate)
        bar = st.progress(0.0, text=f"0 of {len(ready.configs)} configurations sized")

        def each(i: int, capacity: Capacity) -> None:
            bar.progress((i + 1) / len(ready.configs), text=f"{i + 1} of {len(ready.configs)} configurations sized")

        plan = plan_capacity(
            ready.configs, ready.traffic, question.slo, scales=CHART_SCALES, left_out=ready.left_out,
            progress=status.write, each=each,
        )  # fmt: skip
        status.update(label=f"Planned {len(ready.configs)} configurations in {plan.wall_s:.0f} s", state="complete")
    return plan


def render(db: Database | None, entries: dict[str, Hardware]) -> None:
    """The serving mode: the question's inputs (from the URL), Run, and the answer once run (module doc)."""
    st.caption(
        "Capacity plan, predicted by the serving simulator: the highest rate one replica sustains within the SLO, "
        "the replicas the traffic's peak needs, GPU-hours and cost per million output tokens."
    )
    values = read_params()
    for line in init_state(values, entries):
        st.warning(escape_markdown(line))
    values, traffic, problems = traffic_inputs(values)
    values = config_inputs(slo_inputs(values), entries)
    found_ok, why_not = checked(values, traffic, entries) if not problems else (None, problems[0])
    pressed = st.button("Run the capacity search", type="primary", disabled=found_ok is None, help=why_not or None)
    if found_ok is None:
        st.caption(f"Run is disabled: {escape_markdown(why_not)}")
    key = json.dumps({k: v for k, v in values.items() if k != "y"}, sort_keys=True)
    if pressed and found_ok is not None:
        question, ready = found_ok
        st.session_state["cap_answer"] = (key, run_plan(db, question, ready), question.spec.workload.traffic.words())
    found = st.session_state.get("cap_answer")
    values["y"] = str(st.session_state.get("cap_y", values["y"]))
    if found and found[0] == key:
        answer(found[1], found[2])
        values["y"] = st.radio(
            "Chart against the SLO", ["replicas", "cost"], key="cap_y", horizontal=True,
            format_func={"replicas": "replicas for the peak", "cost": "$ per 1M output tokens"}.get,
        )  # fmt: skip
        charts(found[1], values["y"])
    write_params(values)
