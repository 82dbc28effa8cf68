"""scale: a run's headline figures in columns (back-filled from its JSON), indexes for listings and history

Runs, Explore and History read these columns instead of parsing every run's metrics JSON.
Existing runs are back-filled once, in batches of 2,000, with the same function the save
path uses (storage/columns.py); a row whose JSON cannot be read keeps NULL columns.

Revision ID: 0007_scale
Revises: 0006_run_series
Create Date: 2026-12-02 09:00:00
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0007_scale"
down_revision = "0006_run_series"
branch_labels = None
depends_on = None

BATCH = 2000
_STATS = ("mean", "p50", "p90", "p95", "p99")
# The registry's stored metrics when this revision was written (frozen: a later metric needs a later revision).
METRIC_COLUMNS: tuple[str, ...] = (
    *(f"{g}_{s}" for g in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms") for s in _STATS),
    "output_tokens_per_s",
    "requests_per_s",
    "tokens_per_s_per_user",
    "output_tokens_per_s_per_gpu",
    "goodput_requests_per_s",
    "goodput_fraction",
    "error_rate",
    "peak_memory_bytes",
    "weights_memory_bytes",
    "load_s",
    "energy_per_output_token_j",
    "avg_power_w",
    "quality_perplexity",
    "quality_kl_mean",
    "quality_kl_p99",
    "quality_top1_agreement",
    "quality_greedy_flip_rate",
)
OTHER_COLUMNS: tuple[tuple[str, sa.types.TypeEngine], ...] = (
    ("completed", sa.Integer()),
    ("failed", sa.Integer()),
    ("noise", sa.Text()),
    ("contended", sa.Boolean()),
    ("knobs_json", sa.Text()),
    ("tasks_json", sa.Text()),
)


def upgrade() -> None:
    for name, type_ in OTHER_COLUMNS:
        op.add_column("runs", sa.Column(name, type_, nullable=True))
    for name in METRIC_COLUMNS:
        op.add_column("runs", sa.Column(name, sa.Float(), nullable=True))
    op.create_index("ix_runs_device", "runs", ["device"])
    op.create_index("ix_runs_fingerprint_status_id", "runs", ["fingerprint", "status", "id"])
    backfill(op.get_bind())


def backfill(conn: sa.Connection) -> int:
    """Fill the headline columns of every run from its stored JSON; returns how many rows were filled."""
    from storage.columns import column_values
    from storage.jsontext import loads_or_none

    names = [*METRIC_COLUMNS, *(n for n, _ in OTHER_COLUMNS)]
    runs = sa.table("runs", sa.column("id"), *(sa.column(n) for n in names))
    update = runs.update().where(runs.c.id == sa.bindparam("row_id")).values({n: sa.bindparam(n) for n in names})
    read = sa.text(
        "SELECT id, engine, spec_json, metrics_json, quality_json FROM runs WHERE id > :last ORDER BY id LIMIT :n"
    )
    last, filled = 0, 0
    while True:
        rows = conn.execute(read, {"last": last, "n": BATCH}).all()
        if not rows:
            return filled
        params = []
        for row in rows:
            try:
                values = column_values(
                    loads_or_none(row.spec_json),
                    loads_or_none(row.metrics_json),
                    loads_or_none(row.quality_json),
                    row.engine,
                )
            except (ValueError, TypeError) as exc:
                logging.getLogger("storage").warning("run %s keeps empty headline columns: %s", row.id, exc)
                continue
            params.append({"row_id": row.id, **{n: values.get(n) for n in names}})
        if params:
            conn.execute(update, params)
        filled += len(params)
        last = rows[-1].id


def downgrade() -> None:
    op.drop_index("ix_runs_fingerprint_status_id", table_name="runs")
    op.drop_index("ix_runs_device", table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        for name in (*METRIC_COLUMNS, *(n for n, _ in OTHER_COLUMNS)):
            batch_op.drop_column(name)
