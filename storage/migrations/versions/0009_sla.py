"""sla_searches: SLA finder searches (definition, probes, answer), advanced by workers and the CLI

Revision ID: 0009_sla
Revises: 0008_optimize
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_sla"
down_revision = "0008_optimize"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sla_searches",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("definition_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("probes_json", sa.Text(), nullable=False),
        sa.Column("answer_json", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_sla_searches_status", "sla_searches", ["status"])


def downgrade() -> None:
    op.drop_index("ix_sla_searches_status", table_name="sla_searches")
    op.drop_table("sla_searches")
