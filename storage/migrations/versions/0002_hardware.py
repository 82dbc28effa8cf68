"""hardware measurements: local calibration micro-benchmark results

Revision ID: 0002_hardware
Revises: 0001
Create Date: 2026-11-30 01:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_hardware"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hardware_measurements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("device", sa.String(length=50), nullable=False),
        sa.Column("device_name", sa.String(length=200), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("copy_gbs", sa.Float(), nullable=False),
        sa.Column("matmul_json", sa.Text(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("details_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("hardware_measurements", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_hardware_measurements_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_hardware_measurements_host"), ["host"], unique=False)
        batch_op.create_index(batch_op.f("ix_hardware_measurements_device"), ["device"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("hardware_measurements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_hardware_measurements_device"))
        batch_op.drop_index(batch_op.f("ix_hardware_measurements_host"))
        batch_op.drop_index(batch_op.f("ix_hardware_measurements_created_at"))
    op.drop_table("hardware_measurements")
