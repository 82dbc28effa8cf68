"""A capacity plan in words and table rows, said once for the command line and the What-if page (pure).

Every row is a configuration's answer under the SLO: the rate one replica sustains, the replicas the
traffic's peak needs, GPU-hours per hour, dollars per million output tokens (or why there is no figure),
and its calibration: each figure is predicted, with the calibration's band where it has one and "no band"
where the roofline is uncalibrated.
"""

from __future__ import annotations

from engine.whatif.capacity.cost import CATALOG_PRICE, NO_PRICE
from engine.whatif.capacity.planner import CapacityPlan, short_calibration
from engine.whatif.capacity.sizing import Capacity
from engine.whatif.capacity.slo import NAMES
from engine.whatif.capacity.traffic import Traffic

COLUMNS = (
    "configuration",
    "sustained per replica",
    "replicas for peak",
    "GPU-h per hour",
    "$ per 1M out tokens",
    "within SLO (predicted)",
    "calibration",
)


def _rate(value: float | None, unit: str) -> str:
    return "" if value is None else f"{value:,.3g} {unit}"


def _money(c: Capacity) -> str:
    cost = c.main.cost
    if c.main.sustained is None:
        return "SLO not met"
    if cost.usd_per_million_tokens is None:
        return NO_PRICE
    return f"${cost.usd_per_million_tokens:,.3g}"


def _within(c: Capacity, unit: str) -> str:
    """``yes: TTFT 311, TPOT 22.4 ms`` at the sustained rate, else how close it came and where."""
    main = c.main
    if main.at_sustained is not None:
        values = main.at_sustained.check(main.slo).values
        if "goodput" in values:
            return f"yes: goodput {values['goodput']:.1%}"
        shown = ", ".join(f"{NAMES[k]} " + ("-" if v is None else f"{v:,.3g}") for k, v in values.items())
        return f"yes: {shown} ms"
    if main.closest is not None:
        probe, check = main.closest
        return f"no: {check.ratio:.2g}x the limit at {_rate(probe.rate, unit)}"
    return "no"


def rows(plan: CapacityPlan) -> list[dict[str, str]]:
    """One row per configuration sized (:data:`COLUMNS`), as text; blank where there is no figure."""
    unit = plan.traffic.unit
    out = []
    for c in plan.capacities:
        cost = c.main.cost
        out.append(
            dict(
                zip(
                    COLUMNS,
                    (
                        c.config.label,
                        _rate(c.main.sustained, unit),
                        "" if cost.replicas is None else str(cost.replicas),
                        "" if cost.gpu_hours_per_hour is None else str(cost.gpu_hours_per_hour),
                        _money(c),
                        _within(c, unit),
                        short_calibration(c.config.calibration),
                    ),
                    strict=True,
                )
            )
        )
    return out


def traffic_words(traffic: Traffic, source_words: str) -> str:
    """``synthetic ... at 50 req/s (Poisson): peak 50 req/s, mean 50 req/s, 128 output tokens each; 1,000 simulated
    per probe``."""
    unit = traffic.unit
    if traffic.arrival == "trace":
        sent = f"on its own schedule; peak {_rate(traffic.peak_rate, unit)} over {traffic.window_s:g} s windows"
    else:
        sent = (
            f"{traffic.arrival.replace('poisson', 'Poisson')} arrivals at {_rate(traffic.peak_rate, unit)} (its peak)"
        )
    return (
        f"{source_words}, {sent}, mean {_rate(traffic.mean_rate, unit)}, "
        f"{traffic.tokens_per_arrival:,.4g} output tokens per arrival; each probe simulates "
        f"{len(traffic.sample):,} of its {len(traffic.plan.measured):,} requests"
    )


def notes(plan: CapacityPlan) -> list[str]:
    """What the table rests on, a line each: calibrations (once each), prices, configurations left out."""
    lines = [f"calibration: {label}" for label in dict.fromkeys(c.config.calibration.label for c in plan.capacities)]
    prices = dict.fromkeys(
        f"price of {c.config.hardware.key}: {c.config.price.words()}"
        + (f": {_price_note(c)}" if c.config.price.source == CATALOG_PRICE else "")
        for c in plan.capacities
    )
    lines += list(prices)
    lines += [f"left out: {x.label}: {x.reason}" for x in plan.left_out]
    return lines


def _price_note(c: Capacity) -> str:
    """The catalog's price note: its source and date."""
    found = [n for n in c.config.hardware.notes.split("; ") if n.startswith("price ")]
    return found[0].split(": ", 1)[-1] if found else "source in the hardware catalog"


def render_text(plan: CapacityPlan, source_words: str) -> str:
    """The plan as the command line prints it: header, aligned table, notes, the answer in a sentence."""
    table = rows(plan)
    widths = {h: max(len(h), *(len(r[h]) for r in table)) for h in COLUMNS}
    lines = [
        "Capacity plan (predicted by the serving simulator, not measured)",
        f"traffic: {traffic_words(plan.traffic, source_words)}",
        f"SLO: {plan.slo.words()}",
        "",
        "  ".join(h.ljust(widths[h]) for h in COLUMNS).rstrip(),
        *("  ".join(r[h].ljust(widths[h]) for h in COLUMNS).rstrip() for r in table),
        "",
        *notes(plan),
        "",
        plan.sentence(),
    ]
    return "\n".join(lines)
