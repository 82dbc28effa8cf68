"""``python -m engine knobs``: every recipe knob, its choices, and why a choice cannot
run on a device (the same rules the Launch page and pre-flight apply)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypedDict

from engine.cli.common import UsageError, emit_json
from engine.spec import SpecError, engines

if TYPE_CHECKING:
    from engine.cli.common import Subparsers


class KnobRow(TypedDict):
    """One recipe knob as ``knobs`` lists it; ``choices``: each choice -> why it cannot run here (None: it can)."""

    knob: str
    type: str
    default: object  # the field's default, as the recipe class gives it
    description: str
    choices: dict[str, str | None]


def knob_table(engine: str, device: str) -> list[KnobRow]:
    """One row per knob: name, type, default, description, and per-choice availability."""
    from engine.spec import engines, forms

    recipe_cls = engines.recipe_class(engine)  # SpecError naming the registered engines
    choices = forms.options(engine, device)  # per-device choices, where the engine's form offers them
    rows: list[KnobRow] = []
    for name, info in recipe_cls.model_fields.items():
        if name == "engine":
            continue
        rows.append(
            {
                "knob": name,
                "type": str(info.annotation).replace("typing.", ""),
                "default": info.get_default(call_default_factory=True),
                "description": info.description or "",
                "choices": {str(k): v for k, v in choices.get(name, {}).items()},
            }
        )
    return rows


def cmd_knobs(args: argparse.Namespace) -> int:
    if args.device != "cpu" and not args.device.startswith("cuda:"):
        raise SpecError(f"device {args.device!r} is not 'cpu' or 'cuda:N'")
    where = _on_cluster(args.device, args.ray_address)
    rows = knob_table(args.engine, args.device)
    if args.json:
        emit_json(rows)
        return 0
    print(f"knobs of engine {args.engine} on {args.device}{where}  (set with --knob NAME=VALUE)")
    for row in rows:
        print(f"\n{row['knob']}  (default {row['default']!r})  {row['description']}")
        for value, reason in row["choices"].items():
            print(f"    {value:<28}{'ok' if reason is None else 'unavailable: ' + reason}")
    return 0


def _on_cluster(device: str, address: str | None) -> str:
    """`` on ray: 2 nodes — 8 × H100`` when a Ray address is given or configured (LATENCYLAB_RAY_ADDRESS),
    after checking the cluster offers ``device`` (a GPU group: that many GPUs on one node); else ``""``."""
    from engine.jobs.cluster_devices import cluster_devices
    from engine.measure.devices import gpu_indices

    cluster = cluster_devices(address)
    if cluster is None:
        return ""
    if cluster.problem:
        raise UsageError(cluster.problem)
    gpus = len(gpu_indices(device))
    if device not in cluster.devices and not (gpus > 1 and gpus <= cluster.max_gpus_per_node):
        raise SpecError(f"{cluster.summary} offers {', '.join(cluster.devices) or 'no devices'}, not {device}")
    return f" on {cluster.summary}"


def register(sub: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    p = sub.add_parser("knobs", parents=[common, as_json], help="list recipe knobs and what a device can run")
    p.add_argument("--engine", default=engines.default().name, help=f"one of {', '.join(engines.names())}")
    p.add_argument("--device", default="cpu", help="cpu | cuda:N (whose rules to apply)")
    p.add_argument(
        "--ray-address", metavar="ADDR", help="check the device against this Ray cluster's (LATENCYLAB_RAY_ADDRESS)"
    )
    p.set_defaults(func=cmd_knobs)
