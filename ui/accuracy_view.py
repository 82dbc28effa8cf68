"""The accuracy section of a run's page: perplexity, fidelity to the reference recipe,
task accuracy, and what could not be measured (and why)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from engine.measure import registry
from ui.text import escape_markdown


def _fmt(value: Any, spec: str) -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, spec)


def task_table(quality: dict[str, Any]) -> pd.DataFrame:
    """One row per task: its score in the task metric's own unit (registry), standard error, examples, kind."""
    rows = []
    hints = registry.task_kinds(quality)
    for key, value in registry.accuracy_metrics(quality).items():
        if not key.startswith("quality.task:"):
            continue
        metric = registry.lookup(key, hints.get(key))
        name = key.removeprefix("quality.")
        rows.append(
            {
                "task": name.removeprefix("task:"),
                "score": metric.format(value),
                "stderr": metric.format(registry.finite(quality.get(f"{name}:stderr"))),
                "better": metric.better,
                "examples": quality.get(f"{name}:n"),
                "kind": quality.get(f"{name}:kind"),
            }
        )
    return pd.DataFrame(rows, columns=["task", "score", "stderr", "better", "examples", "kind"])


def render_accuracy(run: Any) -> None:
    """Show a stored run's accuracy (``run.quality``), or say why there is none."""
    quality: dict[str, Any] | None = getattr(run, "quality", None)
    st.markdown("#### Accuracy")
    spec = getattr(run, "spec", None) or {}
    if str((spec.get("model") or {}).get("source", "")).startswith("synthetic:"):
        st.caption("No accuracy: synthetic (random) weights measure latency only.")
        return
    if not quality:
        st.caption("No accuracy measured for this run (add `--quality ppl,fidelity` to the run).")
        return
    cols = st.columns(4)
    ppl_help = f"on {quality.get('corpus', 'the corpus')}, {quality.get('perplexity_tokens', '?')} tokens"
    if quality.get("perplexity_stderr") is not None:
        ppl_help += f", ± {quality['perplexity_stderr']:.3f} (std. error)"
    perplexity = registry.lookup("quality.perplexity")  # one format for perplexity on every page (20.35)
    cols[0].metric("Perplexity", perplexity.format(registry.finite(quality.get("perplexity"))), help=ppl_help)
    cols[1].metric(
        "KL mean / p99",
        f"{_fmt(quality.get('kl_mean'), '.4f')} / {_fmt(quality.get('kl_p99'), '.3f')}",
        help="KL(reference || this recipe) of next-token distributions, nats per token",
    )
    top1 = quality.get("top1_agreement")
    cols[2].metric(
        "Top-1 agreement",
        "-" if top1 is None else f"{top1:.1%}",
        help="share of corpus positions where the most likely token matches the reference recipe's",
    )
    flips = quality.get("greedy_flip_rate")
    cols[3].metric(
        "Greedy flips",
        "-" if flips is None else f"{flips:.1%}",
        help=f"of {quality.get('greedy_flip_tokens', 0)} reference greedy tokens on the workload's prompts",
    )
    if quality.get("baseline_perplexity") is not None:
        reference = quality.get("reference") or "default recipe of this engine (default knobs, native precision)"
        st.caption(
            f"Reference: {escape_markdown(reference)}, same device: perplexity "
            f"{perplexity.format(registry.finite(quality['baseline_perplexity']))}; baseline {'reused from cache' if quality.get('baseline_cached') else 'computed in this run'}."
        )
    tasks = task_table(quality)
    if not tasks.empty:
        st.dataframe(tasks, hide_index=True, width="stretch")
    for key, note in (quality.get("notes") or {}).items():
        st.info(f"{escape_markdown(key)}: {escape_markdown(note)}")
