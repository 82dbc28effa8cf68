"""run_series: a run's side records by kind (device telemetry, server metrics, profiles)

Revision ID: 0006_run_series
Revises: 0005_trials
Create Date: 2026-12-01 11:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_run_series"
down_revision = "0005_trials"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_series",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_run_series_run_id", "run_series", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_series_run_id", table_name="run_series")
    op.drop_table("run_series")
