"""requests: each request's own output length, its session and turn, whether it was cancelled, and
the prompt tokens the engine found in its prefix cache

Revision ID: 0010_traffic
Revises: 0009_sla
Create Date: 2026-12-04 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_traffic"
down_revision = "0009_sla"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("requested_output_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("session", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("turn", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("cancelled", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("cached_prompt_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("cached_prompt_tokens")
        batch.drop_column("cancelled")
        batch.drop_column("turn")
        batch.drop_column("session")
        batch.drop_column("requested_output_tokens")
