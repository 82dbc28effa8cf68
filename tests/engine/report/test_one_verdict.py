"""One verdict everywhere (issue 34): Compare, Explore's rings, the reports and the CLI agree on a pair.

Three stored pairs with raw stamps and per-block perplexity scored on the same text:
- faster but worse: decode 0.74x (significant) and perplexity +0.4 % (paired: significant);
- no difference: the same distributions, intervals within ± 5 % on both axes;
- under-powered: 6 requests a run and perplexity without per-block scores (unpaired, ± 24 %).
Compare read the first "faster, worse"; Explore rang it "tied within noise" (its grey band over the plot).
"""

from __future__ import annotations

import html
import json

import pytest
from seed_runs import make_run, paired_quality, real_quality

from engine.cli.main import main
from engine.report.compare import compare_runs
from engine.report.export import comparison_html, explore_html, load_requests, load_runs
from engine.report.fronts import pareto_fronts, with_intervals
from engine.report.verdict_matrix import STATES, state_matrix
from engine.report.verdicts import run_samples, verdicts_between
from storage.frames import figure_records, runs_frame

X, Y = "tpot_ms_p50", "quality.perplexity"
PAIRS = {
    "faster but worse": (
        {"tpot_ms": 10.0, "n": 30, "quality": paired_quality(0.0, 1)},
        {"tpot_ms": 7.4, "n": 30, "seed": 1, "quality": paired_quality(0.004, 2)},
    ),
    "no difference": (
        {"tpot_ms": 10.0, "n": 30, "quality": paired_quality(0.0, 1)},
        {"tpot_ms": 10.0, "n": 30, "seed": 1, "quality": paired_quality(0.0, 3)},
    ),
    "under-powered": (
        {"tpot_ms": 10.0, "n": 6, "quality": real_quality(perplexity=18.76)},
        {"tpot_ms": 10.4, "n": 6, "seed": 1, "quality": real_quality(perplexity=18.80)},
    ),
}
EXPECTED = {
    "faster but worse": {X: "better", Y: "worse"},
    "no difference": {X: "same", Y: "same"},
    "under-powered": {X: "unclear", Y: "unclear"},
}


def _store(db, case: str) -> tuple[int, int]:
    base, new = PAIRS[case]
    return make_run(db, **base), make_run(db, **new)


def _explore(db, ids):
    frame = runs_frame(db)
    frame = frame[frame["run_id"].isin(ids)]
    records = figure_records(db, list(ids))
    frame = with_intervals(frame, [X, Y], records)
    return frame, records, pareto_fronts(frame, X, Y, records=records)


@pytest.mark.parametrize("case", list(PAIRS))
def test_compare_explore_the_reports_and_the_cli_give_one_verdict(db, db_url, capsys, case):
    base_id, new_id = _store(db, case)
    runs, _ = load_runs(db, [base_id, new_id])
    requests = load_requests(db, [base_id, new_id])
    comparison = compare_runs(runs, base_id, requests)
    compare = {k: comparison.verdicts[new_id][k].state for k in (X, Y)}
    assert compare == EXPECTED[case], comparison.summaries[new_id]

    # Explore: the pair's states, and the front they make
    frame, records, fronts = _explore(db, (base_id, new_id))
    rows = frame.set_index("run_id").loc[[base_id, new_id]].reset_index()
    recs = [records[base_id], records[new_id]]
    explore = {k: STATES[state_matrix(k, rows[k].tolist(), recs)[0, 1]] for k in (X, Y)}
    assert explore == compare
    (group,) = fronts.groups
    if case == "faster but worse":  # a trade-off: both on the front, joined by its line, not ringed
        assert sorted(fronts.groups[group]) == [base_id, new_id] and not fronts.ringed(group)
    elif case == "no difference":
        assert sorted(fronts.tied[group]) == [base_id, new_id] and not fronts.unclear[group]
    else:
        assert sorted(fronts.unclear[group]) == [base_id, new_id] and not fronts.tied[group]

    # the reports: the comparison report opens with Compare's decision line; Explore's says the same states
    decision = comparison.decisions[new_id].text
    assert html.escape(decision) in comparison_html(runs, requests, base_id)
    report = explore_html(frame, X, Y, records=records, fronts=fronts)
    words = {
        "better": "faster decode (significant",
        "same": "no significant difference in decode",
        "unclear": "decode: not enough data",
    }
    assert words[compare[X]] in report

    # the CLI
    assert main(["compare", "--db", db_url, "--runs", f"{base_id},{new_id}", "--json"]) == 0
    (cli,) = json.loads(capsys.readouterr().out)["runs"]
    assert {k: cli["verdicts"][k]["state"] for k in (X, Y)} == compare and cli["decision"] == decision


def test_the_matrix_gives_every_pair_the_verdict_compare_gives_without_raw_samples(db):
    """Pair by pair, on runs of every kind: intervals or none, paired perplexity or not, too few requests."""
    kinds = [
        {"tpot_ms": 10.0, "n": 30, "quality": paired_quality(0.0, 1)},
        {"tpot_ms": 9.0, "n": 30, "seed": 1, "quality": paired_quality(0.002, 2)},
        {"tpot_ms": 10.1, "n": 30, "seed": 2, "quality": paired_quality(-0.001, 3)},
        {"tpot_ms": 7.0, "n": 6, "seed": 3, "quality": real_quality(perplexity=18.0)},
        {"tpot_ms": 12.0, "n": 4, "seed": 4, "quality": real_quality(perplexity=25.0)},
        {"tpot_ms": 11.0, "n": 30, "seed": 5, "without_intervals": True},
    ]
    ids = [make_run(db, **kw) for kw in kinds]
    runs, _ = load_runs(db, ids)
    frame = runs_frame(db).set_index("run_id").loc[ids].reset_index()
    records = figure_records(db, ids)
    for key in (X, Y, "output_tokens_per_s", "ttft_ms_p99"):
        matrix = state_matrix(key, frame[key].tolist(), [records[i] for i in ids])
        for i, base in enumerate(runs):
            for j, run in enumerate(runs):
                values = ({key: frame[key].iloc[i]}, {key: frame[key].iloc[j]})
                values = tuple({k: None if v != v else v for k, v in d.items()} for d in values)
                scalar = verdicts_between(base, run, [key], values).get(key)
                assert STATES[matrix[i, j]] == scalar.state, (key, base.id, run.id, scalar)


def test_compare_with_raw_samples_and_explore_without_them_agree_on_a_clear_pair(db):
    """Compare's bootstrap over requests and Explore's stored intervals are two readings of one rule."""
    base_id, new_id = _store(db, "faster but worse")
    runs, _ = load_runs(db, [base_id, new_id])
    requests = load_requests(db, [base_id, new_id])
    samples = tuple(run_samples(requests[r.id], r.metrics["duration_s"]) for r in runs)
    values = tuple({X: r.metrics["tpot_ms"]["p50"]} for r in runs)
    with_samples = verdicts_between(runs[0], runs[1], [X], values, samples)[X]
    without = verdicts_between(runs[0], runs[1], [X], values)[X]
    assert with_samples.state == without.state == "better"


@pytest.mark.parametrize("runs", ["1", "1,x", "1,2,3,4,5,6,7,8,9"])
def test_the_compare_verb_refuses_anything_but_two_to_eight_runs(db_url, runs, capsys):
    assert main(["compare", "--db", db_url, "--runs", runs]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line
