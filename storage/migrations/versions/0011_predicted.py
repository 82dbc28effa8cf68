"""runs: predicted (a run the serving simulator predicted rather than measured), false for every run so far

Revision ID: 0011_predicted
Revises: 0010_traffic
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_predicted"
down_revision = "0010_traffic"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ALTER TABLE ADD COLUMN, never a batch copy of ``runs``: on SQLite a batch recreates the table,
    # and dropping the old one would cascade to every run's requests. The default back-fills every run false.
    op.add_column("runs", sa.Column("predicted", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_runs_predicted", "runs", ["predicted"])


def downgrade() -> None:
    op.drop_index("ix_runs_predicted", table_name="runs")
    if op.get_bind().dialect.name == "sqlite":  # in place (SQLite 3.35+): a batch copy would cascade as above
        op.execute("ALTER TABLE runs DROP COLUMN predicted")
    else:
        op.drop_column("runs", "predicted")
