"""Fingerprints of stored specs never change: a spec written in any shape the project ever stored (the flat
workload of before ``Workload.traffic``, every request source) keeps the fingerprint it was stored under, and
its canonical JSON reads back to the same fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.spec import parse_job_spec

GOLDEN = json.loads((Path(__file__).parent / "golden_fingerprints.json").read_text())


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: c["fingerprint"])
def test_stored_specs_keep_their_fingerprints(case):
    spec = parse_job_spec(case["spec"])
    assert spec.fingerprint() == case["fingerprint"]
    assert parse_job_spec(spec.canonical_json()).fingerprint() == case["fingerprint"]
