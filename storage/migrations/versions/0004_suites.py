"""suites: suite definitions, the jobs queued for their entries (with tags), cron schedules

Revision ID: 0004_suites
Revises: 0003_audit
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_suites"
down_revision = "0003_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "suites",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=1000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "suite_jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("suite", sa.String(length=200), nullable=False),
        sa.Column("entry", sa.String(length=200), nullable=False),
        sa.Column("tag", sa.String(length=200), nullable=True),
        sa.Column("fingerprint", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("suite_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_suite_jobs_suite"), ["suite"], unique=False)
        batch_op.create_index(batch_op.f("ix_suite_jobs_tag"), ["tag"], unique=False)
        batch_op.create_index(batch_op.f("ix_suite_jobs_job_id"), ["job_id"], unique=False)
    op.create_table(
        "suite_schedules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("suite", sa.String(length=200), nullable=False),
        sa.Column("file", sa.String(length=1000), nullable=True),
        sa.Column("cron", sa.String(length=200), nullable=False),
        sa.Column("tag", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("since_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_due_ts", sa.BigInteger(), nullable=True),
        sa.Column("last_queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_ids", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("suite"),
    )


def downgrade() -> None:
    op.drop_table("suite_schedules")
    with op.batch_alter_table("suite_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_suite_jobs_job_id"))
        batch_op.drop_index(batch_op.f("ix_suite_jobs_tag"))
        batch_op.drop_index(batch_op.f("ix_suite_jobs_suite"))
    op.drop_table("suite_jobs")
    op.drop_table("suites")
