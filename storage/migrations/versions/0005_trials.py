"""trials: which measured phase (trial or adaptive round) of a run each request belongs to

Old rows read as trial 0 (a run of one measured phase).

Revision ID: 0005_trials
Revises: 0004_suites
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_trials"
down_revision = "0004_suites"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("trial", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("requests", schema=None) as batch_op:
        batch_op.drop_column("trial")
