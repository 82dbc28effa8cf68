"""audit: who submitted, cancelled or deleted (jobs), and who launched a run

Revision ID: 0003_audit
Revises: 0002_hardware
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_audit"
down_revision = "0002_hardware"
branch_labels = None
depends_on = None

JOB_COLUMNS = ("submitted_by", "cancelled_by", "deleted_by")


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        for name in JOB_COLUMNS:
            batch_op.add_column(sa.Column(name, sa.String(length=200), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("submitted_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("submitted_by")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        for name in reversed(JOB_COLUMNS):
            batch_op.drop_column(name)
