"""``python -m engine compare --runs 1,2 [--baseline 1]``: the decision line, the summary and each verdict.

The same comparison as the Compare page and the HTML report (:func:`engine.report.compare.compare_runs`,
from the runs' raw requests), said in the same words (:mod:`engine.report.verdict_words`). ``--json``
gives each run's decision, grade and every metric's verdict state, ratio and 95 % CI.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK, UsageError, emit_json, int_arg, open_db
from engine.cli.export import MAX_COMPARE, parse_ids

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jsonvalue import JSONObject, JSONValue
    from engine.report.compare import Comparison
    from engine.report.verdicts import Verdict


def _verdict_json(verdict: Verdict, words: str) -> JSONObject:
    iv = verdict.interval
    return {
        "state": verdict.state,
        "ratio": verdict.ratio,
        "ci": None if iv is None else [iv.lo, iv.hi],
        "paired": verdict.paired,
        "words": words,
    }


def comparison_json(comparison: Comparison) -> JSONObject:
    """The comparison as one JSON object: the baseline, and per other run its decision and verdicts."""
    from engine.report.verdict_words import table_words

    runs: list[JSONValue] = []
    for run_id, decision in comparison.decisions.items():
        verdicts = comparison.verdicts.get(run_id, {})
        runs.append(
            {
                "run_id": run_id,
                "name": comparison.labels[run_id],
                "decision": decision.text,
                "grade": decision.grade,
                "repeat": decision.repeat,
                "summary": comparison.summaries.get(run_id),
                "verdicts": {k: _verdict_json(v, table_words(v)) for k, v in verdicts.items()},
            }
        )
    baseline = comparison.baseline_id
    return {"baseline": {"run_id": baseline, "name": comparison.labels[baseline]}, "runs": runs}


def _print(comparison: Comparison) -> None:
    from engine.measure import registry
    from engine.report.verdict_words import VERDICT_NOTE, ratio_words, table_words

    print(f"Decision (against {comparison.labels[comparison.baseline_id]}):")
    for decision in comparison.decisions.values():
        print(f"  {decision.text}")
    print("\nSummary:")
    for text in comparison.summaries.values():
        print(f"  {text}")
    for run_id, verdicts in comparison.verdicts.items():
        print(f"\n{comparison.labels[run_id]} ÷ baseline:")
        for key, verdict in verdicts.items():
            label = registry.label(key, comparison.hints.get(key))
            both = (comparison.supported.get(i, {}).get(key, True) for i in (run_id, comparison.baseline_id))
            ratio = comparison.ratios[run_id].get(key) if all(both) else None  # none of "n too small" figures
            print(f"  {label[:34]:<35}{ratio_words(ratio, verdict):<36}{table_words(verdict)}")
    print(f"\n{VERDICT_NOTE}")


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare stored runs with a baseline and print (or emit as JSON) the verdicts."""
    from engine.report.compare import compare_runs
    from engine.report.export import load_requests, load_runs

    ids = parse_ids(args.runs)
    if not 2 <= len(ids) <= MAX_COMPARE:
        raise UsageError(f"--runs: give 2 to {MAX_COMPARE} run ids, e.g. --runs 1,2")
    if args.baseline is not None and args.baseline not in ids:
        raise UsageError(f"--baseline {args.baseline} is not one of the compared runs")
    db = open_db(args)
    runs, missing = load_runs(db, ids)
    if missing:
        raise UsageError(f"no run {', '.join(map(str, missing))} in {db.url}; list runs with: python -m engine runs")
    comparison = compare_runs(runs, args.baseline, load_requests(db, ids))
    if args.json:
        emit_json(comparison_json(comparison))
    else:
        _print(comparison)
    return EXIT_OK


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``compare`` verb."""
    p = subparsers.add_parser(
        "compare",
        parents=[common, as_json],
        help="compare stored runs: the decision line, the summary and each metric's verdict",
        description="The verdicts the Compare page gives: better / worse (significant), no significant difference "
        "(the 95 % CI within ± 5 %), or not enough data.",
    )
    p.add_argument("--runs", required=True, help="comma-separated run ids, e.g. 1,2,3")
    p.add_argument("--baseline", type=int_arg, help="the run the others are compared against (default: as Compare)")
    p.set_defaults(func=cmd_compare)
